import Foundation
import Haul
import Logging

/// Turns the manager's events into aria2's notifications for every WebSocket client, and runs
/// the `--on-download-complete` and `--on-download-error` commands.
actor Notifier {
    /// Commands run with aria2's arguments: GID, number of files (always 1), file path.
    struct Hooks: Sendable {
        var onComplete: String?
        var onError: String?
    }

    let hooks: Hooks
    let logger: Logger
    private var subscribers: [UUID: AsyncStream<JSONValue>.Continuation] = [:]
    /// Downloads between a start and its end: aria2 announces a pause or a stop only for these.
    private var transferring: Set<String> = []
    private var isClosed = false

    init(hooks: Hooks, logger: Logger) {
        self.hooks = hooks
        self.logger = logger
    }

    /// Notifications from now on, until ``close()``. A client that does not read keeps only the latest 256.
    func subscribe() -> AsyncStream<JSONValue> {
        let (stream, continuation) = AsyncStream.makeStream(of: JSONValue.self, bufferingPolicy: .bufferingNewest(256))
        guard !isClosed else {
            continuation.finish()
            return stream
        }
        let key = UUID()
        subscribers[key] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(key) }
        }
        return stream
    }

    /// Ends every subscriber's stream, now and from now on: the daemon is stopping.
    func close() {
        isClosed = true
        for subscriber in subscribers.values { subscriber.finish() }
        subscribers = [:]
    }

    private func unsubscribe(_ key: UUID) {
        subscribers[key] = nil
    }

    /// Follows `manager` until its event stream ends (the manager shut down).
    func follow(_ manager: DownloadManager) async {
        for await event in await manager.events() {
            let wasTransferring = transferring.contains(event.id)
            if case .started = event { transferring.insert(event.id) } else if event.isTerminal { transferring.remove(event.id) }
            guard let name = Self.notification(for: event) else { continue }
            if name == "aria2.onDownloadPause" || name == "aria2.onDownloadStop", !wasTransferring { continue }
            let message: JSONValue = ["jsonrpc": "2.0", "method": .string(name), "params": [["gid": .string(event.id)]]]
            for subscriber in subscribers.values { subscriber.yield(message) }
            switch event {
            case .completed(let id, let result):
                logger.notice("\(id) complete: \(result.path)")
                run(hooks.onComplete, id: id, path: result.path)
            case .failed(let id, let error) where error.kind != .cancelled:
                let download = await manager.download(id)
                logger.notice("\(id) failed: \(download?.url ?? ""): \(error.message)")
                run(hooks.onError, id: id, path: download.map { $0.destinationIsFile ? $0.destination : "" } ?? "")
            default:
                break
            }
        }
        close()
    }

    /// aria2's notification for an event: a removed (cancelled) download stops, any other
    /// failure is an error. Progress, adding and forgetting have none.
    static func notification(for event: DownloadManager.Event) -> String? {
        switch event {
        case .started: "aria2.onDownloadStart"
        case .paused: "aria2.onDownloadPause"
        case .completed: "aria2.onDownloadComplete"
        case .failed(_, let error): error.kind == .cancelled ? "aria2.onDownloadStop" : "aria2.onDownloadError"
        case .added, .progress, .removed: nil
        }
    }

    /// Starts `command GID 1 PATH` (found on PATH when it has no slash) without waiting for it.
    private func run(_ command: String?, id: String, path: String) {
        guard let command, !command.isEmpty else { return }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [command, id, "1", path]
        process.standardInput = FileHandle.nullDevice
        let logger = logger
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
