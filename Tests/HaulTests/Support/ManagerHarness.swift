import Foundation
import Synchronization
@testable import Haul

/// Every event a manager sends, recorded in order from the moment of subscribing.
final class EventLog: Sendable {
    private let recorded = Mutex<[DownloadManager.Event]>([])
    private let reader = Mutex<Task<Void, Never>?>(nil)

    static func recording(_ manager: DownloadManager, includingProgress: Bool = true) async -> EventLog {
        let log = EventLog()
        let stream = await manager.events(includingProgress: includingProgress)
        log.reader.withLock { $0 = Task { for await event in stream { log.recorded.withLock { $0.append(event) } } } }
        return log
    }

    /// Waits until every event is recorded: the stream ends when the manager shuts down.
    func ended() async {
        await reader.withLock { $0 }?.value
    }

    var events: [DownloadManager.Event] { recorded.withLock { $0 } }

    /// Events other than progress, as "kind id" strings: easy to compare.
    func lifecycle(of id: DownloadManager.ID? = nil) -> [String] {
        events.compactMap { event -> String? in
            guard id == nil || event.id == id else { return nil }
            switch event {
            case .added(let id): return "added \(id)"
            case .started(let id): return "started \(id)"
            case .progress: return nil
            case .paused(let id): return "paused \(id)"
            case .completed(let id, _): return "completed \(id)"
            case .failed(let id, _): return "failed \(id)"
            case .removed(let id): return "removed \(id)"
            case .upload(let id, let event):
                switch event {
                case .added: return "upload added \(id)"
                case .started: return "upload started \(id)"
                case .paused: return "upload paused \(id)"
                case .completed: return "upload completed \(id)"
                case .failed: return "upload failed \(id)"
                case .removed: return "upload removed \(id)"
                }
            }
        }
    }

    /// The most downloads that were between "started" and their terminal event at once.
    var peakRunning: Int {
        var running = Set<DownloadManager.ID>()
        var peak = 0
        for event in events {
            if case .started(let id) = event { running.insert(id) }
            if event.isTerminal { running.remove(event.id) }
            peak = max(peak, running.count)
        }
        return peak
    }

    /// Whether each "started" is followed by exactly one terminal event before the next start.
    var everyAttemptEndsOnce: Bool {
        var open: [DownloadManager.ID: Bool] = [:]
        for event in events {
            switch event {
            case .started(let id):
                if open[id] == true { return false }
                open[id] = true
            case .paused(let id), .completed(let id, _), .failed(let id, _), .removed(let id):
                if open[id] == true { open[id] = false }
            default:
                break
            }
        }
        return !open.values.contains(true)
    }

    func waitFor(_ line: String, timeout: Duration = .seconds(20)) async throws -> Bool {
        try await waitUntil(timeout: timeout) { lifecycle().contains(line) }
    }
}

extension Harness {
    func manager(_ downloader: Downloader, maxConcurrent: Int = 5, perHost: Int = 16) -> DownloadManager {
        DownloadManager(
            downloader: downloader,
            configuration: .init(maxConcurrentDownloads: maxConcurrent, maxConnectionsPerHost: perHost))
    }
}

/// A manager on a store in memory, without a state folder: for tests whose attempts are stand-ins
/// (``DownloadManager/setAttemptRunner(_:)``), so nothing touches the network or the disk.
func inMemoryManager(maxConcurrent: Int = 16, perHost: Int = 16) throws -> (DownloadManager, Downloader) {
    let downloader = Downloader(Downloader.Configuration(stateDirectory: "/nonexistent"), store: try Store(inMemory: ()))
    let configuration = DownloadManager.Configuration(maxConcurrentDownloads: maxConcurrent, maxConnectionsPerHost: perHost)
    return (DownloadManager(downloader: downloader, configuration: configuration), downloader)
}
