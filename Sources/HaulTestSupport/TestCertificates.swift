import Foundation
import Synchronization

/// A test certificate authority and certificates it signed, as PEM files made with `openssl`.
///
/// Made once per test process (the first call to ``shared()`` takes a few tenths of a second;
/// later calls return the same files) in a temp folder removed when the process exits normally.
/// Every key is ECDSA P-256. Every certificate but the CA's is valid from a day ago for a year
/// unless said otherwise:
///
/// | property | certificate |
/// | --- | --- |
/// | ``ca`` | the CA: `CN=Haul Test CA`, self-signed; trust it (`--cacert`) to accept the others |
/// | ``server`` | `127.0.0.1` (IP SAN) and `localhost` (DNS SAN), server auth |
/// | ``expired`` | the same names, but valid only from 60 to 30 days ago |
/// | ``wrongName`` | `wrong.example` only (DNS SAN) |
/// | ``client`` | `CN=haul-test-client`, client auth, for nginx's `/mtls/` |
///
/// ```swift
/// let certs = try TestCertificates.shared()
/// let nginx = try await NginxServer.start(root: folder, options: .init(tls: .init(certs.server, clientCA: certs.ca.certificate)))
/// // curl --cacert certs.ca.certificate --cert certs.client.certificate --key certs.client.key nginx.url("/mtls/a.bin")
/// ```
public struct TestCertificates: Sendable {
    /// A certificate and its private key, as paths of PEM files.
    public struct Pair: Sendable, Hashable {
        /// The certificate (PEM, one certificate).
        public var certificate: String
        /// Its private key (PEM, unencrypted PKCS#8).
        public var key: String
    }

    /// The `openssl` binary, or nil when none is installed.
    public static var opensslPath: String? {
        ServerSupport.findExecutable("openssl", extraDirectories: ["/usr/bin", "/usr/local/bin"])
    }

    /// The folder holding every file.
    public let directory: String
    /// The test CA.
    public let ca: Pair
    /// For `127.0.0.1` and `localhost`, signed by ``ca``.
    public let server: Pair
    /// For `127.0.0.1` and `localhost`, signed by ``ca``, expired 30 days ago.
    public let expired: Pair
    /// For `wrong.example` only, signed by ``ca``.
    public let wrongName: Pair
    /// A client certificate (`CN=haul-test-client`, extended key usage client auth), signed by ``ca``.
    public let client: Pair

    /// The certificates of this test process, made on first use.
    ///
    /// - Throws: ``TestServerError/notInstalled`` without openssl, ``TestServerError/toolFailed``
    ///   when openssl fails (the message quotes it). A failure is not retried: every later call
    ///   throws the same error.
    public static func shared() throws -> TestCertificates {
        try cached.get()
    }

    private static let cached: Result<TestCertificates, any Error> = Result {
        let certificates = try make()
        Self.madeDirectory.withLock { $0 = certificates.directory }
        atexit {
            if let directory = TestCertificates.madeDirectory.withLock({ $0 }) {
                try? FileManager.default.removeItem(atPath: directory)
            }
        }
        return certificates
    }

    private static let madeDirectory = Mutex<String?>(nil)

    /// A folder holding the test CA under its subject's hash (`5ad8a5d6.0`), as
    /// `update-ca-certificates` lays out `/etc/ssl/certs`: a trust store read one certificate
    /// at a time.
    ///
    /// - Throws: ``TestServerError/notInstalled`` without openssl, ``TestServerError/toolFailed``
    ///   when it cannot tell the hash.
    public func hashedCAFolder() throws -> String {
        guard let openssl = Self.opensslPath else { throw TestServerError.notInstalled("openssl", package: "openssl") }
        let result = try ServerSupport.run(openssl, ["x509", "-hash", "-noout", "-in", ca.certificate], in: URL(fileURLWithPath: directory))
        let hash = String(decoding: result.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, !hash.isEmpty else { throw TestServerError.toolFailed("openssl x509 -hash failed (exit \(result.status))") }
        let hashed = (directory as NSString).appendingPathComponent("hashed")
        try FileManager.default.createDirectory(atPath: hashed, withIntermediateDirectories: true)
        let named = (hashed as NSString).appendingPathComponent("\(hash).0")
        if !FileManager.default.fileExists(atPath: named) { try FileManager.default.copyItem(atPath: ca.certificate, toPath: named) }
        return hashed
    }

    /// Makes a new set in a new temp folder (``shared()`` makes one per process; call this only
    /// to test the making). The caller removes ``directory``.
    public static func make() throws -> TestCertificates {
        guard let openssl = opensslPath else { throw TestServerError.notInstalled("openssl", package: "openssl") }
        let folder = try ServerSupport.makeDirectory("haul-certs")
        do {
            let made = try Maker(openssl: openssl, folder: folder).makeAll()
            return made
        } catch {
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
    }
}

/// The openssl steps: a self-signed CA, then each leaf as a key and request signed with
/// `openssl ca`, the one command of OpenSSL 3.0 that takes any validity dates (`x509 -days` cannot
/// go into the past; `req -not_before` needs OpenSSL 3.4).
private struct Maker {
    let openssl: String
    let folder: URL

    func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    func makeAll() throws -> TestCertificates {
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("issued"), withIntermediateDirectories: true)
        try caConfig.write(to: folder.appendingPathComponent("ca.cnf"), atomically: true, encoding: .utf8)
        try Data().write(to: folder.appendingPathComponent("index.txt"))
        try "1000\n".write(to: folder.appendingPathComponent("serial"), atomically: true, encoding: .utf8)

        try openssl([
            "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "3650", "-subj", "/CN=Haul Test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        let now = Date()
        let day: TimeInterval = 86_400
        let fresh = (now - day, now + 365 * day)
        let server = try leaf("server", subject: "/CN=127.0.0.1", extensions: "server", validity: fresh)
        let expired = try leaf("expired", subject: "/CN=127.0.0.1", extensions: "server", validity: (now - 60 * day, now - 30 * day))
        let wrongName = try leaf("wrong-name", subject: "/CN=wrong.example", extensions: "wrong_name", validity: fresh)
        let client = try leaf("client", subject: "/CN=haul-test-client", extensions: "client", validity: fresh)
        return TestCertificates(
            directory: folder.path, ca: .init(certificate: path("ca.pem"), key: path("ca.key")),
            server: server, expired: expired, wrongName: wrongName, client: client)
    }

    private func leaf(
        _ name: String, subject: String, extensions: String, validity: (Date, Date)
    ) throws -> TestCertificates.Pair {
        try openssl([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", subject,
        ])
        try openssl([
            "ca", "-batch", "-config", path("ca.cnf"), "-cert", path("ca.pem"), "-keyfile", path("ca.key"),
            "-in", path("\(name).csr"), "-out", path("\(name).pem"), "-extensions", extensions, "-notext",
            "-startdate", Self.asn1Time(validity.0), "-enddate", Self.asn1Time(validity.1),
        ])
        return .init(certificate: path("\(name).pem"), key: path("\(name).key"))
    }

    @discardableResult
    private func openssl(_ arguments: [String]) throws -> Data {
        let result = try ServerSupport.run(openssl, arguments, in: folder)
        guard result.status == 0 else {
            let said = result.error.split(separator: "\n").suffix(3).joined(separator: " | ")
            throw TestServerError.toolFailed("openssl \(arguments.prefix(2).joined(separator: " ")) failed (exit \(result.status)): \(said)")
        }
        return result.output
    }

    /// `YYYYMMDDHHMMSSZ`, the GeneralizedTime `openssl ca -startdate/-enddate` take.
    static func asn1Time(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMddHHmmss'Z'"
        return formatter.string(from: date)
    }

    /// `openssl ca`'s config: a throwaway database in the folder, any subject, and one extension
    /// section per kind of leaf.
    private var caConfig: String {
        """
        [ca]
        default_ca = test_ca

        [test_ca]
        dir = \(folder.path)
        database = $dir/index.txt
        new_certs_dir = $dir/issued
        serial = $dir/serial
        default_md = sha256
        policy = any_subject
        unique_subject = no
        copy_extensions = none
        email_in_dn = no

        [any_subject]
        commonName = supplied

        [server]
        basicConstraints = critical,CA:FALSE
        keyUsage = critical,digitalSignature,keyEncipherment
        extendedKeyUsage = serverAuth
        subjectAltName = IP:127.0.0.1,DNS:localhost
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid

        [wrong_name]
        basicConstraints = critical,CA:FALSE
        keyUsage = critical,digitalSignature,keyEncipherment
        extendedKeyUsage = serverAuth
        subjectAltName = DNS:wrong.example
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid

        [client]
        basicConstraints = critical,CA:FALSE
        keyUsage = critical,digitalSignature
        extendedKeyUsage = clientAuth
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid

        """
    }
}
