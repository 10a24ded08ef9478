import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix

/// Calls a daemon's aria2 JSON-RPC over HTTP POST, with its secret. `haul add`, `haul ls`
/// and the other client commands use it; so can any Swift program.
public struct RPCClient: Sendable {
    public let endpoint: DaemonEndpoint

    public init(endpoint: DaemonEndpoint) {
        self.endpoint = endpoint
    }

    /// A one-line reason a call failed: the daemon is missing or unreachable, or the method failed.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        /// The JSON-RPC error when the daemon answered with one.
        public var error: RPCError?
    }

    /// The daemon of `stateDirectory`, from the `daemon.json` it wrote at start.
    public static func discover(stateDirectory: String) throws(Failure) -> RPCClient {
        let endpoint: DaemonEndpoint?
        do { endpoint = try DaemonEndpoint.read(stateDirectory: stateDirectory) } catch {
            throw Failure(description: "cannot read \(DaemonEndpoint.path(in: stateDirectory)): \(error.localizedDescription)")
        }
        guard let endpoint else {
            throw Failure(description: "no haul daemon is running for the state folder \(stateDirectory); start one with: haul daemon &")
        }
        return RPCClient(endpoint: endpoint)
    }

    /// Calls `method` with `params` (the token is added) and returns its result.
    public func call(_ method: String, _ params: [JSONValue] = []) async throws(Failure) -> JSONValue {
        let tokened = endpoint.secret.map { [JSONValue.string("token:\($0)")] + params } ?? params
        let body: JSONValue = ["jsonrpc": "2.0", "id": "haul", "method": .string(method), "params": .array(tokened)]
        var request = HTTPClientRequest(url: endpoint.rpcURL)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body.data))
        let answer: JSONValue
        do {
            let response = try await Self.client.execute(request, timeout: .seconds(30))
            let bytes = try await response.body.collect(upTo: 64 << 20)
            answer = try JSONValue.parse(bytes.readableBytesView)
        } catch let error as HTTPClientError where error == .connectTimeout || error == .remoteConnectionClosed {
            throw unreachable("\(error)")
        } catch let error as DecodingError {
            throw Failure(description: "the daemon at \(endpoint.rpcURL) answered something that is not JSON-RPC: \(error)")
        } catch {
            throw unreachable(Self.reason(error))
        }
        if let error = answer["error"] {
            let rpcError = RPCError(code: Int(error["code"]?.integer ?? 1), message: error["message"]?.string ?? "\(error)")
            throw Failure(description: rpcError.message, error: rpcError)
        }
        return answer["result"] ?? .null
    }

    /// Fails at once when nothing listens (the shared client retries a refused connection
    /// until the request times out), and gives up connecting after 2 s.
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(2)))
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }()

    private func unreachable(_ reason: String) -> Failure {
        Failure(description: "cannot reach the haul daemon at \(endpoint.rpcURL) (\(reason)); is it running? Start it with: haul daemon &")
    }

    static func reason(_ error: any Error) -> String {
        if let error = error as? NIOConnectionError, let first = error.connectionErrors.first {
            return reason(first.error)
        }
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }
}
