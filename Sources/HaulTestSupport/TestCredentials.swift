import Foundation

/// A user name and password a test server demands (HTTP Basic for nginx's `/auth/` and the
/// forward proxy, RFC 1929 for the SOCKS proxy).
///
/// ```swift
/// let alice = TestCredentials(user: "alice", password: "s3cret")
/// let proxy = try await ForwardProxy.start(credentials: alice)
/// ```
public struct TestCredentials: Sendable, Hashable {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// `user:password` with both parts percent-encoded, for the user-info part of a URL.
    public var userInfo: String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: "\u{0}"..."\u{7F}"))
        allowed.insert(charactersIn: "-._~")
        let user = user.addingPercentEncoding(withAllowedCharacters: allowed) ?? user
        let password = password.addingPercentEncoding(withAllowedCharacters: allowed) ?? password
        return "\(user):\(password)"
    }

    /// The value of an `Authorization` (or `Proxy-Authorization`) header: `Basic BASE64`.
    public var basicAuthorization: String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }
}
