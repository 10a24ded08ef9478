import Foundation
import Haul
import Logging
import ServiceLifecycle
import Synchronization

/// The daemons of a fleet, talking through their store (PostgreSQL's `LISTEN`/`NOTIFY`,
/// ``DownloadManager/sendToFleet(_:to:)``): a call about a download another daemon holds
/// (`pause`, `remove`, `changeOption`, `tellStatus`…) is carried to that one and its answer
/// brought back (``call(_:_:_:)``); the notifications of each go to the WebSocket clients of
/// every other (``relay(_:)``), while the others have any.
///
/// A message is JSON: `{"call": {"id", "method", "params"}}`, `{"reply": ID, "answer": …}`
/// (the answer object as a call's: `result` or `error`), `{"events": [[METHOD, GID], …]}`.
final class FleetLink: Service {
    let manager: DownloadManager
    let logger: Logger
    /// What this daemon hears from the others.
    private let messages: AsyncStream<FleetMessage>
    private struct State {
        /// Calls carried to another daemon, waiting for its reply.
        var waiting: [String: CheckedContinuation<JSONValue?, Never>] = [:]
        /// Runs a call carried here.
        var answer: (@Sendable (String, [JSONValue]) async -> JSONValue)?
        /// Hands a notification from another daemon to this one's WebSocket clients.
        var deliver: (@Sendable (JSONValue) -> Void)?
        /// How many WebSocket clients this daemon has.
        var listeners: (@Sendable () -> Int)?
        /// Notifications waiting to go out (``relay(_:)``).
        var outgoing: [JSONValue] = []
        /// Another daemon has WebSocket clients, as of the last send.
        var othersListen = false
    }
    private let state = Mutex(State())

    /// How long a call carried to another daemon waits for its answer.
    static let callTimeout: Duration = .seconds(5)
    /// How often this daemon's notifications go out to the others, batched.
    static let relayInterval: Duration = .milliseconds(100)

    /// Listens for the others' messages before it returns: nothing sent after is missed.
    init(manager: DownloadManager, logger: Logger) async {
        self.manager = manager
        self.logger = logger
        messages = await manager.fleetMessages()
    }

    /// Answers the calls carried here with `answer` (a method, its parameters: the answer object).
    func answerCalls(with answer: @escaping @Sendable (String, [JSONValue]) async -> JSONValue) {
        state.withLock { $0.answer = answer }
    }

    /// Hands the others' notifications to `deliver`, which has `listeners` clients.
    func deliverNotifications(to deliver: @escaping @Sendable (JSONValue) -> Void, listeners: @escaping @Sendable () -> Int) {
        state.withLock { ($0.deliver, $0.listeners) = (deliver, listeners) }
    }

    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await message in self.messages.cancelOnGracefulShutdown() { self.receive(message) }
            }
            group.addTask {
                while !Task.isCancelled, !Task.isShuttingDownGracefully {
                    try? await Task.sleep(for: Self.relayInterval)
                    await self.sendRelayed()
                }
            }
            await group.next()
            group.cancelAll()
        }
        // Whoever still waits gets no answer now.
        let waiting = state.withLock { state in
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for caller in waiting { caller.resume(returning: nil) }
    }

    // MARK: Calls

    /// Runs `method` with `params` on `peer`, which holds the download it names, and returns
    /// its result (or throws its error); waits at most ``callTimeout``.
    func call(_ peer: DownloadManager.FleetPeer, _ method: String, _ params: [JSONValue]) async throws(RPCError) -> JSONValue {
        let id = UUID().uuidString
        let body: JSONValue = ["call": ["id": .string(id), "method": .string(method), "params": .array(params)]]
        let answer: JSONValue? = await withCheckedContinuation { continuation in
            state.withLock { $0.waiting[id] = continuation }
            Task {
                do throws(DownloadError) { try await manager.sendToFleet(body.description, to: peer.id) } catch {
                    self.resume(id, with: ["error": RPCError.failed("cannot carry \(method) to the daemon \(peer.name): \(error.message)").json])
                    return
                }
                try? await Task.sleep(for: Self.callTimeout)
                self.resume(id, with: nil)
            }
        }
        guard let answer else {
            throw .failed(
                "the daemon \(peer.name), which holds this download, did not answer \(method) within \(Self.callTimeout.components.seconds) s; ask again (if it is gone, another daemon takes the download over within its lease)"
            )
        }
        if let error = answer["error"], let message = error["message"]?.string {
            throw RPCError(code: Int(error["code"]?.integer ?? 1), message: message)
        }
        return answer["result"] ?? .null
    }

    private func resume(_ id: String, with answer: JSONValue?) {
        state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(returning: answer)
    }

    private func receive(_ message: FleetMessage) {
        guard let body = try? JSONValue.parse(Data(message.body.utf8)) else {
            logger.debug("a message from \(message.from) does not read: \(message.body.prefix(200))")
            return
        }
        if let call = body["call"], let id = call["id"]?.string, let method = call["method"]?.string {
            let params = call["params"]?.array ?? []
            guard let answer = state.withLock({ $0.answer }) else { return }
            let (manager, logger) = (manager, logger)
            Task {
                let reply: JSONValue = ["reply": .string(id), "answer": await answer(method, params)]
                do throws(DownloadError) { try await manager.sendToFleet(reply.description, to: message.from) } catch {
                    logger.warning("cannot answer \(method) carried from another daemon: \(error.message)")
                }
            }
        } else if let id = body["reply"]?.string {
            resume(id, with: body["answer"] ?? .null)
        } else if let events = body["events"]?.array, let deliver = state.withLock({ $0.deliver }) {
            for event in events { deliver(event) }
        }
    }

    // MARK: Notifications

    /// Sends `notification` (aria2's, as this daemon's WebSocket clients get it) to the other
    /// daemons' clients, with the others of the next ``relayInterval``; dropped while no other
    /// daemon has a client.
    func relay(_ notification: JSONValue) {
        state.withLock { state in
            if state.othersListen { state.outgoing.append(notification) }
        }
    }

    /// Sends the notifications gathered, as few messages as fit, and looks again at whether the
    /// others listen.
    private func sendRelayed() async {
        // Published at the manager's next look: the others send theirs only while someone listens.
        if let listeners = state.withLock({ $0.listeners }) { await manager.setFleetListeners(listeners()) }
        let othersListen = await manager.fleetPeers().contains { !$0.isThisDaemon && $0.listeners > 0 }
        let outgoing = state.withLock { state in
            defer { (state.outgoing, state.othersListen) = ([], othersListen) }
            return state.outgoing
        }
        guard othersListen, !outgoing.isEmpty else { return }
        var batch: [JSONValue] = []
        var size = 0
        for notification in outgoing {
            let length = notification.description.utf8.count + 1
            if size + length > Self.batchBytes, !batch.isEmpty {
                await send(batch)
                (batch, size) = ([], 0)
            }
            batch.append(notification)
            size += length
        }
        if !batch.isEmpty { await send(batch) }
    }

    /// How many bytes of notifications one message carries (PostgreSQL takes 8000 at most).
    static let batchBytes = 7000

    private func send(_ batch: [JSONValue]) async {
        let body: JSONValue = ["events": .array(batch)]
        do throws(DownloadError) { try await manager.sendToFleet(body.description, to: nil) } catch {
            logger.debug("cannot send notifications to the other daemons: \(error.message)")
        }
    }
}
