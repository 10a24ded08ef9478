import Foundation
import Synchronization

/// Where a download's Basic credentials come from, in curl's and aria2's order: the URL's
/// `user:password@`, then the download's user and password, then `.netrc` when asked to read
/// it. Each `.netrc` is read once per process.
final class CredentialSource: Sendable {
    private let files = Mutex<[String: Netrc?]>([:])

    /// The `Authorization` header for requests to the download's own origin, if any.
    ///
    /// - Parameters:
    ///   - url: the download's URL as given (with its user information, if any).
    ///   - host: the URL's host, to look up in `.netrc`.
    func authorization(for url: String, host: String, network: NetworkOptions) throws(DownloadError) -> String? {
        if let (user, password) = URLRedaction.credentials(url) { return Self.basic(user, password) }
        if let user = network.user { return Self.basic(user, network.password ?? "") }
        guard network.useNetrc else { return nil }
        let path = network.netrcPath ?? Netrc.defaultPath
        let netrc: Netrc?
        if let known = files.withLock({ $0[path] }) {
            netrc = known
        } else {
            netrc = try Netrc.load(path)
            files.withLock { $0[path] = .some(netrc) }
        }
        return netrc?.credentials(for: host).map { Self.basic($0.login, $0.password) }
    }

    static func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }
}
