import Foundation
@testable import HaulTestSupport
import Testing

/// The certificates as openssl sees them: chains, names, dates, matching keys.
@Suite(.enabled(if: runsWith(TestCertificates.opensslPath), "openssl is not installed"))
struct TestCertificatesTests {
    @Test func madeOncePerProcess() throws {
        let start = ContinuousClock.now
        let first = try TestCertificates.shared()
        let second = try TestCertificates.shared()
        #expect(first.directory == second.directory)
        #expect(ContinuousClock.now - start < .seconds(20))
        for pair in [first.ca, first.server, first.expired, first.wrongName, first.client] {
            #expect(FileManager.default.fileExists(atPath: pair.certificate))
            #expect(FileManager.default.fileExists(atPath: pair.key))
        }
    }

    @Test func chainsNamesAndDates() throws {
        let certs = try TestCertificates.shared()
        for pair in [certs.server, certs.wrongName, certs.client] {
            let verify = try openssl(["verify", "-CAfile", certs.ca.certificate, pair.certificate])
            #expect(verify.status == 0, "\(verify.output)")
        }
        let expired = try openssl(["verify", "-CAfile", certs.ca.certificate, certs.expired.certificate])
        #expect(expired.status != 0)
        #expect(expired.output.contains("certificate has expired"), "\(expired.output)")

        #expect(try names(certs.server).contains("IP Address:127.0.0.1, DNS:localhost"))
        #expect(try names(certs.expired).contains("IP Address:127.0.0.1, DNS:localhost"))
        let wrong = try names(certs.wrongName)
        #expect(wrong.contains("DNS:wrong.example") && !wrong.contains("127.0.0.1") && !wrong.contains("localhost"))

        let client = try openssl(["x509", "-in", certs.client.certificate, "-noout", "-subject", "-ext", "extendedKeyUsage"])
        #expect(client.output.contains("CN = haul-test-client"), "\(client.output)")
        #expect(client.output.contains("TLS Web Client Authentication"), "\(client.output)")
        let server = try openssl(["x509", "-in", certs.server.certificate, "-noout", "-ext", "extendedKeyUsage"])
        #expect(server.output.contains("TLS Web Server Authentication"), "\(server.output)")

        // -checkend 0: still valid now; the expired one is not.
        #expect(try openssl(["x509", "-in", certs.server.certificate, "-noout", "-checkend", "0"]).status == 0)
        #expect(try openssl(["x509", "-in", certs.expired.certificate, "-noout", "-checkend", "0"]).status != 0)
    }

    @Test func keysMatchTheirCertificates() throws {
        let certs = try TestCertificates.shared()
        for pair in [certs.ca, certs.server, certs.expired, certs.wrongName, certs.client] {
            let fromCertificate = try openssl(["x509", "-in", pair.certificate, "-noout", "-pubkey"])
            let fromKey = try openssl(["pkey", "-in", pair.key, "-pubout"])
            #expect(fromCertificate.status == 0 && fromCertificate.output == fromKey.output, "\(pair)")
        }
    }

    @Test func makeMakesAFreshSet() throws {
        let certs = try TestCertificates.make()
        defer { try? FileManager.default.removeItem(atPath: certs.directory) }
        #expect(certs.directory != (try TestCertificates.shared()).directory)
        #expect(FileManager.default.fileExists(atPath: certs.client.key))
    }

    private func names(_ pair: TestCertificates.Pair) throws -> String {
        try openssl(["x509", "-in", pair.certificate, "-noout", "-ext", "subjectAltName"]).output
    }

    private func openssl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try ServerSupport.run(TestCertificates.opensslPath ?? "openssl", arguments)
        return (result.status, String(decoding: result.output, as: UTF8.self) + result.error)
    }
}
