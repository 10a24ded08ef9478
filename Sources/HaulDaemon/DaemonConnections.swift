import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// Every open connection of the daemon's listener, so that stopping never waits on a client.
///
/// Hummingbird quiesces a connection only once its first request has arrived; a connection
/// that never sends one (a browser opens spare ones) would keep the listener, and so the
/// daemon, from stopping. Such a connection is closed when the listener quiesces, and
/// whatever is still open a few seconds later is closed too.
final class DaemonConnections: Sendable {
    private let open = Mutex<[ObjectIdentifier: any Channel]>([:])

    func insert(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        open.withLock { $0[key] = channel }
        channel.closeFuture.whenComplete { [weak self] _ in
            _ = self?.open.withLock { $0.removeValue(forKey: key) }
        }
    }

    var count: Int { open.withLock { $0.count } }

    func closeAll() {
        for channel in open.withLock({ Array($0.values) }) { channel.close(promise: nil) }
    }

    /// The child channel of `base`, each connection registered here first.
    func tracking<Base: ServerChildChannel>(_ base: Base) -> some ServerChildChannel {
        Tracked(base: base, connections: self)
    }

    struct Tracked<Base: ServerChildChannel>: ServerChildChannel {
        let base: Base
        let connections: DaemonConnections

        func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Base.Value> {
            connections.insert(channel)
            do { try channel.pipeline.syncOperations.addHandler(IdleConnectionCloser(), position: .first) } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
            return base.setup(channel: channel, logger: logger)
        }

        func handle(value: Base.Value, logger: Logger) async {
            await base.handle(value: value, logger: logger)
        }
    }
}

/// Closes a connection that has not sent a byte when the listener quiesces.
final class IdleConnectionCloser: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private var sawBytes = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        sawBytes = true
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, !sawBytes {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
