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
