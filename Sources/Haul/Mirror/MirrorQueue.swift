/// The manager queue of one mirror (its URL and local folder) in the store: its rows are the
/// files the mirror wrote, which ``Mirror/Configuration/deletesGone`` may remove, and no other.
enum MirrorQueue {
    /// `mirror-` and a stable 64-bit FNV-1a digest of the URL and the folder.
    static func name(url: String, directory: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (url + "\n" + directory).utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "mirror-" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}
