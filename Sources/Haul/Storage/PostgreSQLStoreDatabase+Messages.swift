import Foundation
import Logging
import PostgresNIO

/// The messages members of a fleet send one another: `NOTIFY` on the queue's channel, heard by
/// each member's `LISTEN` on a connection of its own.
extension PostgreSQLStoreDatabase {
    /// The channel of `queue`'s messages: `haul.fleet.` and an FNV-1a hash of its name (a
    /// channel's name is an identifier of at most 63 bytes).
    static func channel(_ queue: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in queue.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "haul.fleet." + String(hash, radix: 16)
    }

    /// Listens for messages to this member in `queue` (`LISTEN`, on a connection of its own, made
    /// again after it broke); returns once it listens, or once its first attempt failed (said in
    /// the log, and tried again). Messages sent while it was not listening are lost: a caller
    /// waits for an answer only so long.
    func listen(_ queue: String) async -> AsyncStream<FleetMessage> {
        let (stream, continuation) = AsyncStream.makeStream(of: FleetMessage.self, bufferingPolicy: .bufferingNewest(10_000))
        let (ready, readied) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let (server, member, logger, location, window) = (self.server, self.member, self.logger, self.location, self.window)
        let channel = Self.channel(queue)
        let task = Task {
            var wait: Duration = .milliseconds(100)
            var said = false
            while !Task.isCancelled {
                do {
                    let connection = try await Self.connect(server, logger: logger)
                    do {
                        try await connection.listen(on: channel) { notifications in
                            (wait, said) = (.milliseconds(100), false)
                            readied.yield()
                            try await withThrowingTaskGroup(of: Void.self) { group in
                                group.addTask {
                                    for try await notification in notifications {
                                        if let message = FleetMessage(envelope: notification.payload, to: member.id) {
                                            continuation.yield(message)
                                        }
                                    }
                                }
                                // A connection that died without a word (a cut cable) hears
                                // nothing: asked now and then, it is closed when it does not answer.
                                group.addTask {
                                    while true {
                                        try await Task.sleep(for: Self.listenerCheck)
                                        _ = try await PostgreSQLConnectionSlot.answered(connection, within: window) { connection in
                                            try await connection.query("SELECT 1", logger: logger)
                                        }
                                    }
                                }
                                try await group.next()
                                group.cancelAll()
                            }
                        }
                    } catch {
                        try? await connection.close()
                        throw error
                    }
                    try? await connection.close()
                } catch {
                    if !said, !Task.isCancelled {
                        said = true
                        logger.warning(
                            "cannot hear the other daemons of the queue \(queue) through \(location) (\(error)); calls carried to this one wait until it can")
                    }
                }
                readied.yield()
                try? await Task.sleep(for: wait)
                wait = min(wait * 2, .seconds(5))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        listeners.withLock { $0.append(task) }
        for await _ in ready { break }
        return stream
    }

    /// Sends `body` to `recipient` (a member's id), or to every other member of `queue` (`NOTIFY`).
    func notify(_ queue: String, _ body: String, to recipient: String?) async throws(DownloadError) {
        let payload = FleetMessage.envelope(from: member.id, to: recipient, body)
        guard payload.utf8.count < Self.largestMessage else {
            throw .invalidRequest("the message is too large to carry to another daemon (\(Self.largestMessage) bytes at most)")
        }
        let (logger, channel) = (logger, Self.channel(queue))
        do {
            _ = try await retrying(on: reader, rows: 1) { connection in
                try await connection.query("SELECT pg_notify(\(channel), \(payload))", logger: logger)
            }
        } catch {
            throw .io("cannot reach the other daemons of the queue through \(location): \(reason(error)); \(advice(error))")
        }
    }

    /// How often the listening connection is asked whether it is still there.
    static let listenerCheck: Duration = .seconds(10)

    /// PostgreSQL's limit on a notification's payload, less one.
    static let largestMessage = 7999
}
