import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A server binary run as a child of the test process, tied to it by a lifeline pipe.
///
/// The shared plumbing of ``NginxServer``, ``ForwardProxy`` and ``SocksProxy``: launch, the
/// watcher that kills the server when the test process goes away, and stopping.
final class ServerProcess: Sendable {
    let process: Process
    /// Write end of the lifeline pipe: closing it (or our process dying) kills the server.
    private let lifeline: FileHandle
    private let stopped = Mutex(false)

    var isRunning: Bool { process.isRunning }
    var pid: pid_t { process.processIdentifier }

    private init(process: Process, lifeline: FileHandle) {
        self.process = process
        self.lifeline = lifeline
    }

    deinit {
        // An owner that forgot stop() must not leave the server running.
        if !stopped.withLock({ $0 }) { try? lifeline.close() }
    }

    /// Runs `executable`, plus a watcher shell that kills it once the lifeline pipe closes:
    /// Foundation's `Process` does not kill children when the test process dies, and a leftover
    /// server would hold its port and, worse, a CI runner's pipes.
    ///
    /// The kill is SIGKILL because a child spawned from a Dispatch worker thread inherits that
    /// thread's signal mask, which blocks SIGTERM, SIGINT, SIGQUIT and SIGCHLD; a server that never
    /// unblocks them ignores them, and a shell's `wait` would never return. `read` needs no signal,
    /// and a throwaway server needs no graceful shutdown.
    ///
    /// - Parameters:
    ///   - output: Where the server's stdout and stderr go (a file in its temp folder), or nowhere.
    static func launch(
        _ executable: String, arguments: [String], output: URL? = nil, name: String
    ) throws -> ServerProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        if let output {
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let handle = try FileHandle(forWritingTo: output)
            process.standardOutput = handle
            process.standardError = handle
            defer { try? handle.close() }
            try process.run()
        } else {
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
        }

        let watcher = Process()
        watcher.executableURL = URL(fileURLWithPath: "/bin/sh")
        watcher.arguments = ["-c", #"read _; kill -KILL "$1" 2>/dev/null"#, "haul-\(name)-watcher", String(process.processIdentifier)]
        let pipe = Pipe()
        watcher.standardInput = pipe
        watcher.standardOutput = FileHandle.nullDevice
        watcher.standardError = FileHandle.nullDevice
        do {
            try watcher.run()
        } catch {
            kill(process.processIdentifier, SIGKILL)
            throw error
        }
        try? pipe.fileHandleForReading.close()
        return ServerProcess(process: process, lifeline: pipe.fileHandleForWriting)
    }

    /// Kills the server and waits (at most a few seconds) until it has exited. Calling it again
    /// does nothing.
    func stop() async {
        guard
            stopped.withLock({ old in
                defer { old = true }; return !old
            })
        else { return }
        // The watcher kills the server while it is still our unreaped child, so its pid cannot
        // have been reused yet.
        try? lifeline.close()
        if !(await Self.waitForExit(process, seconds: 5)) {
            kill(process.processIdentifier, SIGKILL)
            _ = await Self.waitForExit(process, seconds: 2)
        }
    }

    static func waitForExit(_ process: Process, seconds: Int) async -> Bool {
        for _ in 0..<(seconds * 20) {
            guard process.isRunning else { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return !process.isRunning
    }
}

/// Small helpers the test servers share.
enum ServerSupport {
    /// The first executable named `name` in `PATH`, then in `extraDirectories`.
    static func findExecutable(_ name: String, extraDirectories: [String] = []) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates =
            path.split(separator: ":").map { "\($0)/\(name)" }
            + extraDirectories.map { "\($0)/\(name)" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// A private temp folder for one server's config, logs and pid file.
    static func makeDirectory(_ prefix: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// A port that was free a moment ago: bind 127.0.0.1:0, read the port, close.
    static func freePort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port
        try? await channel.close()
        guard let port else { throw ChannelError.unknownLocalAddress }
        return port
    }

    /// True if something accepts a TCP connection on 127.0.0.1:`port` within half a second.
    static func accepts(port: Int) async -> Bool {
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.milliseconds(500))
        guard let channel = try? await bootstrap.connect(host: "127.0.0.1", port: port).get() else { return false }
        try? await channel.close()
        return true
    }

    /// Connects to 127.0.0.1:`port`, sends `bytes` and returns the first bytes answered, or nil
    /// when nothing connects or answers within half a second.
    static func firstAnswer(port: Int, sending bytes: [UInt8]) async -> [UInt8]? {
        let answer = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: [UInt8].self)
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.milliseconds(500))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(FirstBytesHandler(answer: answer))
                }
            }
        guard let channel = try? await bootstrap.connect(host: "127.0.0.1", port: port).get() else {
            answer.fail(ChannelError.connectTimeout(.milliseconds(500)))
            return nil
        }
        let timeout = channel.eventLoop.scheduleTask(in: .milliseconds(500)) {
            answer.fail(ChannelError.connectTimeout(.milliseconds(500)))
        }
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
        let result = try? await answer.futureResult.get()
        timeout.cancel()
        try? await channel.close()
        return result
    }

    /// Runs a short-lived tool (openssl) to completion, feeding it `input`; kills it after
    /// `seconds`. Returns its exit status, stdout and stderr.
    ///
    /// Its output goes to temp files rather than pipes, so a chatty tool cannot fill a pipe and
    /// stall while we wait for it.
    static func run(
        _ executable: String, _ arguments: [String], input: Data? = nil, in directory: URL? = nil,
        seconds: Int = 30
    ) throws -> (status: Int32, output: Data, error: String) {
        let scratch = try makeDirectory("haul-tool")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outURL = scratch.appendingPathComponent("out"), errURL = scratch.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL), err = try FileHandle(forWritingTo: errURL)
        defer { try? out.close(); try? err.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        process.standardOutput = out
        process.standardError = err
        let stdin = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : stdin
        try process.run()
        // A tool that did not take its input fails the run (after it has been waited for).
        var inputError: (any Error)?
        if let input {
            do { try stdin.fileHandleForWriting.write(contentsOf: input) } catch { inputError = error }
        }
        try? stdin.fileHandleForWriting.close()
        let pid = process.processIdentifier
        let killer = DispatchWorkItem { if process.isRunning { kill(pid, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds), execute: killer)
        process.waitUntilExit()
        killer.cancel()
        if let inputError {
            throw TestServerError.toolFailed("cannot write the input of \(executable): \(inputError)")
        }
        let output = (try? Data(contentsOf: outURL)) ?? Data()
        let error = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
        return (process.terminationStatus, output, error)
    }

    /// The last `count` non-empty lines of a log file, joined with " | ", for an error message.
    static func tail(_ file: URL, lines count: Int = 3) -> String {
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(count).joined(separator: " | ")
    }
}

/// Hands the first bytes a connection reads to a promise.
private final class FirstBytesHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let answer: EventLoopPromise<[UInt8]>

    init(answer: EventLoopPromise<[UInt8]>) { self.answer = answer }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        answer.succeed(buffer.readBytes(length: buffer.readableBytes) ?? [])
    }

    func channelInactive(context: ChannelHandlerContext) {
        answer.fail(ChannelError.eof)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        answer.fail(error)
        context.close(promise: nil)
    }
}
