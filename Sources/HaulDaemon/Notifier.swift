import Foundation
import Haul
import Logging
import ServiceLifecycle
import Synchronization

/// Turns the manager's events into aria2's notifications for every WebSocket client, and runs
/// the hooks. Runs as a service: it follows the manager until the manager's events end (the
/// manager shut down), then ends every client's stream, which closes its WebSocket.
final class Notifier: Service {
    let manager: DownloadManager
    /// Taken before the manager restores its queue, so nothing it starts is missed.
    let events: AsyncStream<DownloadManager.Event>
    let hooks: Hooks
    /// Counts each download's end.
    let metrics: DaemonMetrics
    let logger: Logger
    private struct Subscribers {
        var streams: [UUID: AsyncStream<JSONValue>.Continuation] = [:]
        var isClosed = false
        /// The other daemons of a fleet, which get this one's notifications.
        var fleet: FleetLink?
    }
    private let subscribers = Mutex(Subscribers())

    init(manager: DownloadManager, hooks: Hooks, metrics: DaemonMetrics, logger: Logger) async {
        self.manager = manager
        // Its notifications are of starts and ends: a progress snapshot of every download, ten
        // times a second each, would only be dropped here.
        events = await manager.events(includingProgress: false)
        self.hooks = hooks
        self.metrics = metrics
        self.logger = logger
    }

    /// Notifications from now on, until the daemon stops. A client that does not read keeps only the latest 256.
    func subscribe() -> AsyncStream<JSONValue> {
        let (stream, continuation) = AsyncStream.makeStream(of: JSONValue.self, bufferingPolicy: .bufferingNewest(256))
        let key = UUID()
        let added = subscribers.withLock { subscribers in
            guard !subscribers.isClosed else { return false }
            subscribers.streams[key] = continuation
            return true
        }
        guard added else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.streams.removeValue(forKey: key) }
        }
        return stream
    }

    /// In a fleet: sends this daemon's notifications to the others' clients, and theirs to its own.
    func link(_ fleet: FleetLink) {
        subscribers.withLock { $0.fleet = fleet }
        fleet.deliverNotifications(
            to: { [weak self] in self?.send($0) }, listeners: { [weak self] in self?.subscribers.withLock { $0.streams.count } ?? 0 })
    }

    /// Ends every subscriber's stream, now and from now on.
    func close() {
        let streams = subscribers.withLock { subscribers in
            subscribers.isClosed = true
            defer { subscribers.streams = [:] }
            return Array(subscribers.streams.values)
        }
        for stream in streams { stream.finish() }
    }

    /// Gives `message` to this daemon's clients.
    private func send(_ message: JSONValue) {
        let streams = subscribers.withLock { Array($0.streams.values) }
        for stream in streams { stream.yield(message) }
    }

    func run() async {
        // Downloads between a start and its end: aria2 announces a pause or a stop only for these.
        var transferring: Set<DownloadID> = []
        for await event in events {
            metrics.count(event)
            let wasTransferring = transferring.contains(event.id)
            if case .started = event { transferring.insert(event.id) } else if event.isTerminal { transferring.remove(event.id) }
            guard let name = Self.notification(for: event) else { continue }
            if name == "aria2.onDownloadPause" || name == "aria2.onDownloadStop", !wasTransferring { continue }
            // Made only for someone to read it: a daemon nobody watches runs thousands of small files.
            let (listeners, fleet) = subscribers.withLock { ($0.streams.count, $0.fleet) }
            let relayed = fleet?.othersListen == true
            if listeners > 0 || relayed {
                let notification: JSONValue = ["jsonrpc": "2.0", "method": .string(name), "params": [["gid": .string(event.id.description)]]]
                send(notification)
                if relayed { fleet?.relay(notification) }
            }
            switch event {
            case .completed(let id, let result):
                logger.notice("\(id) complete: \(result.path)")
                Hooks.run(hooks.onComplete, id: id.description, path: result.path, logger: logger)
            case .upload(let id, .completed(let result)):
                logger.notice("\(id) uploaded: \(result.file) to \(result.location)")
            case .upload(let id, .failed(let error)) where error.kind != .cancelled:
                logger.notice("\(id) upload failed: \(error.message)")
            case .failed(let id, let error) where error.kind != .cancelled:
                let download = await manager.download(id)
                logger.notice("\(id) failed: \(download?.url ?? ""): \(error.message)")
                Hooks.run(hooks.onError, id: id.description, path: download.map { $0.destinationIsFile ? $0.destination : "" } ?? "", logger: logger)
            default:
                break
            }
        }
        close()
        // The events end when the manager has shut down, before this service's turn to stop: a
        // service that returns before its turn makes the group cancel the rest (the listener's
        // requests in flight, the fleet's link) instead of stopping them in order.
        try? await gracefulShutdown()
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
        case .upload(_, .started): "haul.onUploadStart"
        case .upload(_, .completed): "haul.onUploadComplete"
        case .upload(_, .failed(let error)): error.kind == .cancelled ? nil : "haul.onUploadError"
        case .upload(_, .added), .upload(_, .paused), .upload(_, .removed): nil
        }
    }
}
