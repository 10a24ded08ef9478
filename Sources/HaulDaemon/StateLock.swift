import Foundation

/// One daemon per state folder: two would run the same queue twice.
final class StateLock: Sendable {
    private let fd: Int32

    init(stateDirectory: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        } catch {
            throw Daemon.Failure(description: "cannot create the state folder \(stateDirectory): \(error.localizedDescription)")
        }
        let path = (stateDirectory as NSString).appendingPathComponent("daemon.lock")
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw Daemon.Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            let other = (try? DaemonEndpoint.read(stateDirectory: stateDirectory)).flatMap { $0 }
            let who = other.map { " (pid \($0.pid), listening on \($0.rpcURL))" } ?? ""
            throw Daemon.Failure(
                description:
                    "another haul daemon\(who) is using the state folder \(stateDirectory); stop it first (haul shutdown or kill), or pass another --state-dir")
        }
    }

    func release() { close(fd) }
}
