import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The context of every request the daemon answers: Hummingbird's, plus the client's address,
/// which the wrong-token backoff counts guesses by (``WrongTokenBackoff``).
struct DaemonRequestContext: RequestContext, WebSocketRequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        remoteAddress = source.channel.remoteAddress
    }
}
