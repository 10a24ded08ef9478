import ArgumentParser
import Haul

/// The documented exit codes of `haul get`.
enum ExitStatus {
    static let summary = """
        0 every download succeeded; 1 several kinds of failure; 2 a URL or option is unusable; \
        3 a local file could not be written; 4 network failure after all retries; 5 checksum mismatch; \
        6 the server's answers were inconsistent; 8 the server answered with an HTTP error; \
        64 bad command line; 130 interrupted (paused, rerun to continue; 143 for SIGTERM).
        """

    /// A URL or option is unusable.
    static let unusable: Int32 = 2

    static func code(for error: DownloadError) -> Int32 {
        switch error.kind {
        case .invalidRequest: 2
        case .io: 3
        case .network: 4
        case .checksum: 5
        case .protocolViolation: 6
        case .http: 8
        case .cancelled, .paused: 130
        default: 1
        }
    }

    /// One kind of failure gives its own code; a mix gives 1.
    static func code(for errors: [DownloadError]) -> Int32 {
        let codes = Set(errors.map(code(for:)))
        return codes.count == 1 ? codes.first! : 1
    }
}

extension ExitStatus {
    /// Opens the downloader (its store) for a command; a failure is said in one line and ends
    /// the command with its exit status.
    static func openDownloader(_ configuration: Downloader.Configuration) throws -> Downloader {
        do { return try Downloader(configuration) } catch {
            Terminal.error("\(error)")
            throw ExitCode(code(for: [error]))
        }
    }
}
