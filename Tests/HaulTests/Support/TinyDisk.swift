import Foundation

/// A tmpfs of a few MiB mounted for one test (needs root): a disk that fills up.
struct TinyDisk {
    let path: String

    init?(at path: String, size: String = "2m") {
        self.path = path
        guard (try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)) != nil,
            mount("tmpfs", path, "tmpfs", 0, "size=\(size)") == 0
        else { return nil }
    }

    func unmount() { _ = umount2(path, Int32(MNT_DETACH)) }

    /// Makes the disk read-only (a remount): what root, who writes anywhere else, cannot write.
    func makeReadOnly() -> Bool {
        mount("tmpfs", path, "tmpfs", UInt(MS_REMOUNT | MS_RDONLY), nil) == 0
    }

    static var canMount: Bool {
        guard getuid() == 0 else { return false }
        let probe = NSTemporaryDirectory() + "/haul-mount-probe-\(getpid())"
        defer { rmdir(probe) }
        guard let disk = TinyDisk(at: probe) else { return false }
        disk.unmount()
        return true
    }
}
