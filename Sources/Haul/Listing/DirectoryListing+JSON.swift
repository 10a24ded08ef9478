import Foundation

extension DirectoryListing {
    /// nginx's `autoindex_format json` (`[{"name":…,"type":"directory"|"file",…}]`) and Caddy's
    /// browse JSON (`[{"name":"sub/","url":"./sub/","is_dir":true,…}]`). Names are plain text,
    /// not percent-encoded; Caddy's `url` is preferred to its `name`, which loses bytes that are
    /// not UTF-8. A page that is not such an array has no entries.
    static func readJSON(_ body: [UInt8], into builder: inout Builder) {
        guard let array = try? JSONSerialization.jsonObject(with: Data(RawBytesEscape.escape(body))) as? [Any] else {
            builder.listing.unreadable = true
            return
        }
        for item in array {
            guard let object = item as? [String: Any] else {
                builder.listing.leftOut += 1
                continue
            }
            if let href = object["url"] as? String {
                builder.add(href: String(decoding: RawBytesEscape.bytes(of: href), as: UTF8.self))
                continue
            }
            guard let name = object["name"] as? String else {
                builder.listing.leftOut += 1
                continue
            }
            let isDirectory = (object["type"] as? String) == "directory" || (object["is_dir"] as? Bool) == true
            builder.add(name: name, isDirectory: isDirectory)
        }
    }
}
