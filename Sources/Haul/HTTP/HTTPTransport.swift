import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// An answer whose head has arrived; its body streams with backpressure.
struct HTTPAnswer: Sendable {
    var head: ResponseHead
    var body: HTTPClientResponse.Body
    /// The URL after redirects.
    var url: String
}

/// The engine's only door to the network: AsyncHTTPClient, with redirects (at most 10,
/// loops refused) and the stall timeout as its read timeout.
struct HTTPTransport: Sendable {
    let client: HTTPClient

    static func makeClient(stallTimeout: Duration, rateLimit: Int64? = nil) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: 10, allowCycles: false),
            timeout: .init(connect: .seconds(15), read: TimeAmount(stallTimeout)))
        // AsyncHTTPClient's default of 8 connections per host would cap `-x 16` at 8.
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)
        // The engine wants the bytes as stored: a gzip'd .tar.gz must stay gzip'd.
        configuration.decompression = .disabled
        // AsyncHTTPClient hands the body over one read at a time (its high watermark is one
        // buffer), so the read size sets the pace: NIO's default tops out at 64 KiB, which
        // keeps the network and disk threads taking turns. Reads of up to 1 MiB let them overlap.
        // Under a rate limit, reads stay near a tenth of a second's worth, so the limit paces
        // smoothly instead of in bursts of a whole read.
        let allocator = rateLimit.map { rate in
            let maximum = Int(min(max(rate / 10, 16 << 10), 1 << 20))
            return AdaptiveRecvByteBufferAllocator(minimum: 1 << 10, initial: min(16 << 10, maximum), maximum: maximum)
        } ?? Self.receiveAllocator
        configuration.http1_1ConnectionDebugInitializer = { channel in
            channel.setOption(ChannelOptions.recvAllocator, value: allocator)
        }
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }

    static let receiveAllocator = AdaptiveRecvByteBufferAllocator(minimum: 16 << 10, initial: 64 << 10, maximum: 256 << 10)

    /// Sends one request and returns when the head arrives.
    func send(_ method: HTTPMethod, url: String, headers: [(String, String)], stallTimeout: Duration) async throws(DownloadError) -> HTTPAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "User-Agent", value: "haul/\(HaulVersion.string)")
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        do {
            let response = try await client.execute(request, timeout: .hours(24 * 365))
            let head = ResponseHead(status: Int(response.status.code), reason: response.status.reasonPhrase, headers: response.headers)
            return HTTPAnswer(head: head, body: response.body, url: response.url?.absoluteString ?? url)
        } catch {
            throw Self.map(error, stallTimeout: stallTimeout)
        }
    }

    /// Turns transport errors into one line a person can act on.
    static func map(_ error: any Error, stallTimeout: Duration) -> DownloadError {
        if let error = error as? DownloadError { return error }
        if error is CancellationError { return .cancelled }
        if let error = error as? HTTPClientError {
            switch error {
            case .readTimeout: return .stalled(after: stallTimeout)
            case .connectTimeout: return .network("connection timed out")
            case .redirectCycleDetected: return .redirect("redirect loop")
            case .redirectLimitReached: return .redirect("too many redirects (more than 10)")
            case .invalidURL, .emptyHost, .emptyScheme:
                return .invalidRequest("unsupported or malformed URL (\(error))")
            case .remoteConnectionClosed: return .network("the server closed the connection")
            case .cancelled: return .cancelled
            default: return .network("\(error)")
            }
        }
        if let error = error as? IOError { return .network(String(cString: strerror(error.errnoCode))) }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first?.error as? IOError {
                return .network(String(cString: strerror(first.errnoCode)))
            }
            return .network("cannot connect to \(error.host):\(error.port)")
        }
        return .network("\(error)")
    }
}

/// The version reported in the User-Agent and by `haul --version`.
public enum HaulVersion {
    /// Semantic version string.
    public static let string = "0.1.0"
}
