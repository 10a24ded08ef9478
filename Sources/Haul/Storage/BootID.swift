import Foundation

/// This boot of the machine, as Linux names it (`/proc/sys/kernel/random/boot_id`, a new random
/// UUID at every start of the kernel); nil where there is none to read.
///
/// Bytes a process wrote to a file live in the page cache until they are flushed: a killed or
/// crashed process loses none of them, only a crash of the system or a power cut does. A record
/// of bytes written but not yet flushed is therefore trusted only within the boot that wrote it
/// (``DownloadRow/unsynced``).
enum BootID {
    static let current: String? = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return nil }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        // A UUID: anything else is not a boot id to compare with.
        return id.count == 36 && id.allSatisfy({ $0.isHexDigit || $0 == "-" }) ? id : nil
    }()
}
