import Foundation
import Synchronization

/// Writing to stderr, and the few facts about the terminal the display needs.
enum Terminal {
    static let isInteractive = isatty(STDERR_FILENO) == 1

    /// Writes `text` to stderr. A stderr that cannot take it (a full disk, a closed pipe) loses
    /// it: there is nowhere left to say so. (`FileHandle.write` stopped the process instead:
    /// a mirror's errors written to a file on the disk it filled crashed it.)
    static func write(_ text: String) {
        _ = FileDescriptor.writeAll(STDERR_FILENO, text)
    }

    /// One line, prefixed `haul: `.
    static func error(_ message: String) {
        write("haul: \(message)\n")
    }

    /// Lines of the live display drawn last, so the next draw (or an error) can replace them.
    private static let drawnLines = Mutex(0)

    /// Replaces the live display with `lines`, in one write so it does not flicker.
    static func redraw(_ lines: [String]) {
        let columns = width
        drawnLines.withLock { drawn in
            var text = drawn > 0 ? "\u{1B}[\(drawn)F" : "\r"
            for line in lines { text += "\u{1B}[2K" + String(line.prefix(columns - 1)) + "\n" }
            text += "\u{1B}[J"
            drawn = lines.count
            write(text)
        }
    }

    /// Removes the live display (before an error line, the summary, or exiting).
    static func clearDisplay() {
        guard isInteractive else { return }
        redraw([])
    }

    static var width: Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    static var height: Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0 else { return 24 }
        return Int(size.ws_row)
    }
}

/// Human-readable sizes, rates and durations.
enum Format {
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func rate(_ bytesPerSecond: Double) -> String {
        bytes(Int64(bytesPerSecond)) + "/s"
    }

    static func duration(_ duration: Duration) -> String {
        let total = Int(duration.components.seconds)
        let (h, m, s) = (total / 3600, total / 60 % 60, total % 60)
        return h > 0 ? String(format: "%d:%02d:%02d", h, m, s) : String(format: "%d:%02d", m, s)
    }
}

/// Writes to a file descriptor with `write(2)`.
enum FileDescriptor {
    /// Writes all of `bytes` to `descriptor`, however many calls it takes; the `errno` of the
    /// call that failed, or nil when all went.
    static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let written = Foundation.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += written
        }
        return nil
    }

    static func writeAll(_ descriptor: Int32, _ text: String) -> Int32? {
        var text = text
        return text.withUTF8 { writeAll(descriptor, UnsafeRawBufferPointer($0)) }
    }
}
