import ArgumentParser
import Foundation
import HaulDaemon

struct WaitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait until downloads of the daemon end, printing how each ended.",
        discussion: """
            Prints one line on stdout per download as it ends: GID complete PATH, GID error: MESSAGE \
            or GID removed. A paused download has not ended: it is waited for until resumed and done.

            Exit status: 0 every download completed; 1 several kinds of failure, a download was \
            removed, or the daemon does not know a GID; 3 a local file could not be written; 4 network \
            failure after all retries; 5 checksum mismatch; 8 the server answered with an HTTP error \
            (one kind of failure gives its own status, as with haul get); 64 bad command line; \
            69 no daemon is running for the state folder, or it cannot be reached (also when it stops \
            during the wait); \(Self.timedOut) --timeout expired first (the downloads go on).
            """)

    @Argument(help: "GIDs, as haul add or haul ls printed them.")
    var gids: [String] = []

    @Option(help: "Give up waiting after this many seconds (exit \(Self.timedOut), like timeout(1)); the downloads go on.")
    var timeout: Double?

    @OptionGroup var daemon: DaemonOptions

    /// Often enough that a script moves on promptly, rarely enough to cost the daemon nothing.
    static let pollInterval: Duration = .milliseconds(250)
    static let timedOut: Int32 = 124

    func validate() throws {
        if gids.isEmpty { throw ValidationError("give at least one GID") }
        try GID.validate(gids)
        if let timeout, !(timeout > 0 && timeout <= 366 * 86400) { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() async throws {
        let client = try daemon.connect()
        let deadline = timeout.map { ContinuousClock.now + .milliseconds(Int64($0 * 1000)) }
        var pending = gids.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        var outcomes: [WaitOutcome] = []
        var last: [String: RemoteDownload] = [:]
        while !pending.isEmpty {
            var results: [Result<JSONValue, RPCError>] = []
            do throws(ClientFailure) {
                let keys = JSONValue.array(RemoteDownload.keys.map { .string($0) })
                // A page at a time, however many GIDs were given.
                var start = 0
                while start < pending.count {
                    let page = pending[start..<min(pending.count, start + DaemonClient.pageSize)]
                    results += try await client.multicall(page.map { ("aria2.tellStatus", [.string($0), keys]) })
                    start += DaemonClient.pageSize
                }
            } catch {
                throw error.report()
            }
            var still: [String] = []
            for (gid, result) in zip(pending, results) {
                switch result {
                case .success(let json):
                    let download = RemoteDownload(json)
                    if let outcome = WaitOutcome(download), let line = download.endingLine {
                        StandardOutput.line(line)
                        outcomes.append(outcome)
                    } else {
                        last[gid] = download
                        still.append(gid)
                    }
                case .failure(let error):
                    // Unknown from the start, or its result was removed meanwhile.
                    Terminal.error(error.message.contains(gid) ? error.message : "\(gid): \(error.message)")
                    outcomes.append(.unknown)
                }
            }
            pending = still
            guard !pending.isEmpty else { break }
            if let deadline {
                let left = deadline - .now
                if left <= .zero {
                    let states = pending.map { gid in "\(gid) (\(last[gid].map(Self.state) ?? "?"))" }
                    Terminal.error("timed out after \(Self.seconds(timeout ?? 0)) s; still unfinished: \(states.joined(separator: ", "))")
                    throw ExitCode(Self.timedOut)
                }
                try await Task.sleep(for: min(left, Self.pollInterval))
            } else {
                try await Task.sleep(for: Self.pollInterval)
            }
        }
        let status = WaitOutcome.exitStatus(outcomes)
        if status != 0 { throw ExitCode(status) }
    }

    private static func state(_ download: RemoteDownload) -> String {
        download.percent.map { "\(download.status) \($0)" } ?? download.status
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}

/// How a download `haul wait` waited for ended, and the exit status that says so.
enum WaitOutcome: Hashable {
    case complete
    /// Failed, with aria2's error code.
    case failed(errorCode: String?)
    case removed
    /// The daemon does not know the GID (any more).
    case unknown

    /// How `download` ended, nil while it is active, waiting or paused.
    init?(_ download: RemoteDownload) {
        switch download.status {
        case "complete": self = .complete
        case "error": self = .failed(errorCode: download.errorCode)
        case "removed": self = .removed
        default: return nil
        }
    }

    /// `haul get`'s exit status for the same failure (see ``ExitStatus``), from aria2's error code.
    var exitStatus: Int32 {
        switch self {
        case .complete: return 0
        case .removed, .unknown: return 1
        case .failed(let code):
            switch code {
            case "3", "22", "24": return 8  // not found, other HTTP status, authorization
            case "2", "6", "19": return 4  // timeout, network, name resolution
            case "32": return 5  // checksum
            case "9", "17": return 3  // disk full, file I/O
            case "28": return ExitStatus.unusable  // the URL or an option is unusable
            default: return 1
            }
        }
    }

    /// 0 when all completed; one kind of failure gives its own status; a mix gives 1.
    static func exitStatus(_ outcomes: [WaitOutcome]) -> Int32 {
        let failures = Set(outcomes.map(\.exitStatus).filter { $0 != 0 })
        if failures.isEmpty { return 0 }
        return failures.count == 1 ? failures.first! : 1
    }
}
