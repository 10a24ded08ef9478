import ArgumentParser
import Foundation
import Haul
import HaulDaemon

// The client commands (haul add, ls, status, pause, resume, remove, wait, watch, shutdown)
// are thin: each finds the daemon through the state folder's daemon.json and makes one or a
// few aria2 JSON-RPC calls. What they share is here.

/// `--state-dir`, which names the daemon a client command talks to.
struct DaemonOptions: ParsableArguments {
    @Option(
        help:
            "State folder of the daemon to talk to; its daemon.json says where the daemon listens (default: $HAUL_STATE_DIR, else $XDG_STATE_HOME/haul, else ~/.local/state/haul)."
    )
    var stateDir: String?

    /// The daemon of the state folder, or a one-line error and exit status 69.
    func connect() throws -> DaemonClient {
        let stateDirectory = stateDir ?? Downloader.defaultStateDirectory
        do throws(RPCClient.Failure) {
            return DaemonClient(rpc: try RPCClient.discover(stateDirectory: stateDirectory))
        } catch {
            throw ClientFailure(error).report()
        }
    }
}

/// The exit statuses every client command shares.
enum ClientExitStatus {
    static let summary = """
        0 done; 1 the daemon refused a request (the message says why); 64 bad command line; \
        69 no daemon is running for the state folder, or it cannot be reached.
        """

    static let refused: Int32 = 1
    /// sysexits' EX_UNAVAILABLE, as 64 (bad command line) is its EX_USAGE.
    static let unavailable: Int32 = 69
}

/// Why a call to the daemon failed, as one line: the daemon is missing or unreachable, or it
/// refused the request.
struct ClientFailure: Error, CustomStringConvertible {
    private enum Code { case unavailable, refused }

    private let code: Code
    let description: String

    init(_ failure: RPCClient.Failure) {
        code = failure.error == nil ? .unavailable : .refused
        description = failure.description
    }

    private init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// The daemon refused one call of a multicall.
    static func refused(_ message: String) -> ClientFailure {
        ClientFailure(.refused, message)
    }

    /// The daemon answered something this client does not understand.
    static func unexpected(_ method: String, _ answer: JSONValue) -> ClientFailure {
        ClientFailure(.unavailable, "the daemon's answer to \(method) is not what aria2 answers: \(String(answer.description.prefix(200)))")
    }

    /// The daemon refused one request; the others may still work.
    var isRefusal: Bool { code == .refused }

    var exitStatus: Int32 { code == .refused ? ClientExitStatus.refused : ClientExitStatus.unavailable }

    /// Prints `haul: DESCRIPTION` and returns the exit to throw.
    func report() -> ExitCode {
        Terminal.error(description)
        return ExitCode(exitStatus)
    }
}

/// The daemon's aria2 JSON-RPC, failing with ``ClientFailure``.
struct DaemonClient: Sendable {
    let rpc: RPCClient

    var endpoint: DaemonEndpoint { rpc.endpoint }

    /// The answer of one of Haul's own listing methods (`haul.tellMirrors`, `haul.tellUploads`);
    /// nil from a daemon of an older Haul, which does not have it.
    func list(_ method: String) async throws(ClientFailure) -> [JSONValue]? {
        do throws(ClientFailure) {
            return try await call(method).array
        } catch  where error.isRefusal {
            return nil
        }
    }

    /// The daemon's uploads (`haul.tellUploads`), nil from a daemon of an older Haul.
    func uploads() async throws(ClientFailure) -> [JSONValue]? { try await list("haul.tellUploads") }

    func call(_ method: String, _ params: [JSONValue] = []) async throws(ClientFailure) -> JSONValue {
        do { return try await rpc.call(method, params) } catch { throw ClientFailure(error) }
    }

    /// Calls `method` once for each of `items`, with the parameters `parameters` makes of it,
    /// and prints each answer (a GID) on a line of its own. An item the daemon refuses is said
    /// on a line with its name and the others still go; the command then ends with the refusal's
    /// exit status. A daemon that is gone ends it at once: the others would fail the same way.
    func addEach(_ items: [String], _ method: String, _ parameters: (String) -> [JSONValue]) async throws {
        var refused = false
        for item in items {
            do throws(ClientFailure) {
                let answer = try await call(method, parameters(item))
                guard let gid = answer.string else { throw .unexpected(method, answer) }
                StandardOutput.line(gid)
            } catch  where error.isRefusal {
                Terminal.error("\(item): \(error.description)")
                refused = true
            } catch {
                throw error.report()
            }
        }
        if refused { throw ExitCode(ClientExitStatus.refused) }
    }

    /// `calls` in one `system.multicall` request: each call's result, or the error the daemon
    /// gave it.
    func multicall(_ calls: [(method: String, params: [JSONValue])]) async throws(ClientFailure) -> [Result<JSONValue, RPCError>] {
        // The daemon checks the secret of every call inside the multicall too.
        let token = endpoint.secret.map { [JSONValue.string("token:\($0)")] } ?? []
        let list = calls.map { call -> JSONValue in ["methodName": .string(call.method), "params": .array(token + call.params)] }
        let answer = try await self.call("system.multicall", [.array(list)])
        guard let results = answer.array, results.count == calls.count else {
            throw .unexpected("system.multicall", answer)
        }
        return results.map { result in
            // aria2 wraps each result in a one-element list; a failure is an error object.
            if let wrapped = result.array, let value = wrapped.first { return .success(value) }
            return .failure(RPCError(code: Int(result["code"]?.integer ?? 1), message: result["message"]?.string ?? result.description))
        }
    }

    /// The downloads of `method` (`aria2.tellActive`, …) as a list.
    func downloads(_ result: Result<JSONValue, RPCError>, of method: String) throws(ClientFailure) -> [RemoteDownload] {
        switch result {
        case .success(let value):
            guard let list = value.array else { throw .unexpected(method, value) }
            return list.map(RemoteDownload.init)
        case .failure(let error):
            throw .refused("\(method): \(error.message)")
        }
    }

    /// One download's `tellStatus`.
    func status(_ gid: String, keys: [String] = []) async throws(ClientFailure) -> RemoteDownload {
        let params: [JSONValue] = keys.isEmpty ? [.string(gid)] : [.string(gid), .array(keys.map { .string($0) })]
        let value = try await call("aria2.tellStatus", params)
        guard value.object != nil else { throw .unexpected("aria2.tellStatus", value) }
        return RemoteDownload(value)
    }
}

/// GIDs as given on the command line.
enum GID {
    /// Refuses anything but the 16 hex digits `haul add` and `haul ls` print.
    static func validate(_ gids: [String]) throws {
        for gid in gids where !(gid.count == 16 && gid.allSatisfy(\.isHexDigit)) {
            throw ValidationError("\(gid) is not a GID: give the 16 hex digits haul add or haul ls printed")
        }
    }
}

/// Writes to stdout: what a script reads (GIDs, tables, JSON), unlike the messages on stderr.
enum StandardOutput {
    /// Writes `text`; a standard output that is full or closed is said on stderr, and haul
    /// stops with status 3: a script reading what it prints would read less than there was.
    static func write(_ text: String) {
        guard let code = FileDescriptor.writeAll(STDOUT_FILENO, text) else { return }
        Terminal.error("cannot write to standard output: \(String(cString: strerror(code)))")
        exit(ExitStatus.code(for: DownloadError.io("standard output")))
    }

    static func line(_ text: String) {
        write(text + "\n")
    }

    /// Writes all of `bytes` to file descriptor 1, however many calls it takes.
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/io``) when standard output is closed or full.
    static func write(_ bytes: UnsafeRawBufferPointer) throws(DownloadError) {
        if let code = FileDescriptor.writeAll(STDOUT_FILENO, bytes) {
            throw .io("cannot write to standard output: \(String(cString: strerror(code)))")
        }
    }
}

/// Rows padded into columns two spaces apart: `haul ls` and `haul get`'s summary table.
enum Table {
    /// `rightAligned` columns are numbers and line up on the right; the last column is not padded.
    static func render(_ rows: [[String]], rightAligned: Set<Int> = []) -> String {
        guard let columns = rows.map(\.count).max(), columns > 0 else { return "" }
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        var text = ""
        for row in rows {
            var cells: [String] = []
            for (column, cell) in row.enumerated() {
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                if column == row.count - 1 && !rightAligned.contains(column) {
                    cells.append(cell)
                } else {
                    cells.append(rightAligned.contains(column) ? pad + cell : cell + pad)
                }
            }
            text += cells.joined(separator: "  ") + "\n"
        }
        return text
    }
}
