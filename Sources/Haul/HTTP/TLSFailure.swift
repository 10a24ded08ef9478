import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A TLS handshake that failed, in words: which host, why, and which option would help. Not
/// retried: the same certificate fails the same way on the next try.
struct TLSFailure: Sendable {
    enum Reason: Sendable, Equatable {
        /// The chain does not verify: expired, not yet valid, or from an issuer not trusted.
        case untrusted(detail: String?)
        /// The certificate is valid but for other names.
        case wrongName
        /// The server asked for a client certificate and got none (or one it refused).
        case clientCertificateRefused
        /// The server does not speak TLS on that port.
        case notTLS
        case other(String)
    }

    var reason: Reason

    init(reason: Reason) { self.reason = reason }

    /// The failure in `error`, or nil when it is not a TLS one.
    init?(_ error: any Error) {
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            reason = .wrongName
            return
        }
        // A connection closed without close_notify is no handshake failure: the transport says
        // what it cut.
        guard let error = error as? NIOSSLError, error != .uncleanShutdown else { return nil }
        switch error {
        case .handshakeFailed(let boring):
            let text = "\(boring)"
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                reason = .untrusted(detail: nil)
            } else if text.contains("CERTIFICATE_REQUIRED") || text.contains("ALERT_BAD_CERTIFICATE")
                || text.contains("ALERT_HANDSHAKE_FAILURE") && text.contains("certificate")
            {
                reason = .clientCertificateRefused
            } else if text.contains("WRONG_VERSION_NUMBER") || text.contains("UNKNOWN_PROTOCOL") || text.contains("HTTP_REQUEST") {
                reason = .notTLS
            } else {
                reason = .other(Self.reasonCodes(text))
            }
        case .unableToValidateCertificate, .noCertificateToValidate:
            reason = .untrusted(detail: nil)
        case .cannotMatchULabel:
            reason = .wrongName
        default:
            reason = .other("\(error)")
        }
    }

    /// The one line a person reads.
    ///
    /// - Parameter ca: the CA file the download trusts (`--ca-certificate`), if any: a CA is
    ///   suggested only where one would help and none was given.
    func error(host: String, ca: String? = nil) -> DownloadError {
        let message: String
        switch reason {
        case .untrusted(let detail?) where detail.hasPrefix("it expired") || detail.hasPrefix("it is not valid before"):
            // No CA makes a certificate valid again.
            message =
                "the TLS certificate of \(host) is not trusted: \(detail); the server must renew it, "
                + "or skip the check with --check-certificate=false"
        case .untrusted(let detail):
            let advice =
                ca.map { "its CA is not the one in \($0): give the CA that issued it with --ca-certificate FILE" }
                ?? "trust its CA with --ca-certificate FILE"
            message =
                "the TLS certificate of \(host) is not trusted\(detail.map { ": \($0)" } ?? " (expired, or from an unknown issuer)"); "
                + advice + ", or skip the check with --check-certificate=false"
        case .wrongName:
            message =
                "the TLS certificate of \(host) is for another name; use the name the certificate is for, "
                + "or skip the check with --check-certificate=false"
        case .clientCertificateRefused:
            message = "\(host) wants a client certificate it accepts; give one with --certificate FILE --private-key FILE"
        case .notTLS:
            message = "\(host) does not speak TLS on that port; is the URL http:// rather than https://?"
        case .other(let what):
            message = "TLS handshake with \(host) failed (\(what))"
        }
        return DownloadError(kind: .network, message: message, isRetryable: false)
    }

    /// BoringSSL's reason codes (`CERTIFICATE_VERIFY_FAILED`) without file paths and line numbers.
    private static func reasonCodes(_ text: String) -> String {
        var codes: [String] = []
        var word = ""
        for character in text + " " {
            if character.isUppercase || character.isNumber || character == "_" {
                word.append(character)
            } else {
                if word.count > 6, word.contains("_") { codes.append(word) }
                word = ""
            }
        }
        return codes.isEmpty ? "no details" : codes.joined(separator: ", ")
    }

    /// Why `host:port`'s certificate did not verify: looks at what it presents (without
    /// trusting it) and says whether it is expired or not yet valid; otherwise its issuer is
    /// not trusted. Nil when the server cannot be reached again within a few seconds.
    static func diagnose(host: String, port: Int, now: Date = Date()) async -> String? {
        let chain = await presentedChain(host: host, port: port)
        guard let leaf = chain?.first else { return nil }
        let seconds = time_t(now.timeIntervalSince1970)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        if leaf.notValidAfter < seconds {
            return "it expired on \(formatter.string(from: Date(timeIntervalSince1970: TimeInterval(leaf.notValidAfter))))"
        }
        if leaf.notValidBefore > seconds {
            return "it is not valid before \(formatter.string(from: Date(timeIntervalSince1970: TimeInterval(leaf.notValidBefore))))"
        }
        return chain?.count == 1 ? "it is self-signed or its issuer is unknown" : "its issuer is unknown"
    }

    /// The certificates `host:port` presents, accepted blindly and only looked at.
    private static func presentedChain(host: String, port: Int) async -> [NIOSSLCertificate]? {
        let seen = PresentedChain()
        guard let context = try? NIOSSLContext(configuration: .makeClientConfiguration()) else { return nil }
        let serverName = host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) ? nil : host
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = try NIOSSLClientHandler(context: context, serverHostname: serverName) { certificates, promise in
                        seen.set(certificates)
                        promise.succeed(NIOSSLVerificationResult.failed)
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        guard let channel = try? await bootstrap.connect(host: host, port: port).get() else { return nil }
        // The handshake ends (refused by the callback) within the connect timeout or never.
        for _ in 0..<50 where seen.chain == nil {
            try? await Task.sleep(for: .milliseconds(100))
        }
        try? await channel.close()
        return seen.chain
    }
}

/// The certificates a server presented, written by the TLS handler's callback.
private final class PresentedChain: Sendable {
    private let certificates = Mutex<[NIOSSLCertificate]?>(nil)

    var chain: [NIOSSLCertificate]? { certificates.withLock { $0 } }

    func set(_ chain: [NIOSSLCertificate]) { certificates.withLock { $0 = chain } }
}
