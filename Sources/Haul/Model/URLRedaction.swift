import Foundation

/// URLs as they may be shown and sent: never with the `user:password@` they may carry.
public enum URLRedaction {
    /// `url` without its user information: what every message, list and log shows.
    public static func redact(_ url: String) -> String {
        guard let range = userinfoRange(url) else { return url }
        var shown = url
        shown.removeSubrange(range)
        return shown
    }

    /// The user name and password in `url`, percent-decoded, if it has any.
    static func credentials(_ url: String) -> (user: String, password: String)? {
        guard let range = userinfoRange(url) else { return nil }
        let info = url[range].dropLast()  // the "@"
        let user: Substring
        let password: Substring
        if let colon = info.firstIndex(of: ":") {
            user = info[..<colon]
            password = info[info.index(after: colon)...]
        } else {
            user = info
            password = ""
        }
        return (String(user).removingPercentEncoding ?? String(user), String(password).removingPercentEncoding ?? String(password))
    }

    /// The range of `user[:password]@` between `scheme://` and the host, if any.
    private static func userinfoRange(_ url: String) -> Range<String.Index>? {
        // Most URLs have no "@" at all: one scan of the bytes, no Foundation search.
        guard url.utf8.contains(UInt8(ascii: "@")), let authority = URLParts.authority(of: url),
            let at = url[authority].lastIndex(of: "@")
        else { return nil }
        return authority.lowerBound..<url.index(after: at)
    }
}
