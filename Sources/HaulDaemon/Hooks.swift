import Foundation
import Logging

/// aria2's `--on-download-complete` and `--on-download-error`: a command run with the GID,
/// the number of files (always 1) and the file's path, not waited for.
struct Hooks: Sendable {
    var onComplete: String?
    var onError: String?

    /// Starts `command GID 1 PATH` (found on PATH when it has no slash).
    static func run(_ command: String?, id: String, path: String, logger: Logger) {
        guard let command, !command.isEmpty else { return }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [command, id, "1", path]
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { process in
            if process.terminationStatus != 0 {
                logger.warning("hook \(command) \(id) 1 \(path) exited with status \(process.terminationStatus)")
            }
        }
        do { try process.run() } catch {
            logger.error("cannot run hook \(command): \(error)")
        }
    }
}
