import AsyncHTTPClient
import Foundation
import HaulDaemon
import HummingbirdWSClient
import Logging
import Synchronization

/// Headless Chromium with its DevTools protocol on a free port.
final class Browser: Sendable {
    let process: Process
    let profile: String

    /// Debian's chromium, where installed.
    static var executable: String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// - Parameter arguments: more command-line switches, e.g. `--host-resolver-rules=MAP evil.test 127.0.0.1`.
    init(_ executable: String, profile: String, windowSize: String = "1280,900", arguments: [String] = []) throws {
        self.profile = profile
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments =
            [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--remote-allow-origins=*",
                "--user-data-dir=\(profile)", "--window-size=\(windowSize)",
            ] + arguments + ["about:blank"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Connects to the first page target and runs `body` with it.
    func withPage<T: Sendable>(_ body: @escaping @Sendable (Page) async throws -> T) async throws -> T {
        let portFile = (profile as NSString).appendingPathComponent("DevToolsActivePort")
        // Chromium creates the file, then writes it: wait for a whole first line.
        func port() -> Int? {
            guard let text = try? String(contentsOfFile: portFile, encoding: .utf8), text.contains("\n") else { return nil }
            return text.split(separator: "\n").first.flatMap { Int($0) }
        }
        guard try await waitUntil(timeout: .seconds(30), { port() != nil }), let port = port() else {
            throw Page.Failure(description: "chromium did not open its DevTools port")
        }
        let list = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/json/list"), timeout: .seconds(10))
        let targets = try JSONValue.parse(try await list.body.collect(upTo: 1 << 20).readableBytesView)
        guard let socket = targets.array?.first(where: { $0["type"] == "page" })?["webSocketDebuggerUrl"]?.string else {
            throw Page.Failure(description: "chromium has no page target: \(targets)")
        }
        let result = Mutex<Result<T, any Error>?>(nil)
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 16 << 20
        try await WebSocketClient.connect(url: socket, configuration: configuration, logger: Logger(label: "cdp")) { inbound, outbound, _ in
            let page = Page(outbound: outbound)
            await withTaskGroup(of: Void.self) { group in
                // The only reader: answers go to their callers, events to the page's log.
                group.addTask {
                    do {
                        for try await message in inbound.messages(maxSize: 32 << 20) {
                            if case .text(let text) = message { page.receive(text) }
                        }
                        page.close(Page.Failure(description: "the DevTools connection closed"))
                    } catch {
                        page.close(error)
                    }
                }
                let outcome: Result<T, any Error>
                do { outcome = .success(try await body(page)) } catch { outcome = .failure(error) }
                result.withLock { $0 = outcome }
                // Closing ends the inbound messages, and with them the reader.
                try? await outbound.close(.normalClosure, reason: nil)
                group.cancelAll()
            }
        }
        guard let outcome = result.withLock({ $0 }) else { throw Page.Failure(description: "the DevTools connection closed") }
        return try outcome.get()
    }
}

/// One page over the DevTools protocol: commands with their answers, and a log of the events
/// asked for with ``record(_:)``. Any number of tasks may send at once.
final class Page: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// One event: its method and parameters.
    struct Event: Sendable {
        var method: String
        var params: JSONValue
    }

    private struct State {
        var nextID: Int64 = 0
        var waiting: [Int64: CheckedContinuation<JSONValue, any Error>] = [:]
        /// Answers that came before their caller started waiting.
        var early: [Int64: Result<JSONValue, any Error>] = [:]
        var closed: (any Error)?
        var recording: Set<String> = []
        var events: [Event] = []
    }

    private let outbound: WebSocketOutboundWriter
    private let state = Mutex(State())

    init(outbound: WebSocketOutboundWriter) {
        self.outbound = outbound
    }

    /// Sends a command and waits (at most `timeout`) for its answer.
    func send(_ method: String, _ params: [String: JSONValue] = [:], timeout: Duration = .seconds(30)) async throws -> JSONValue {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await outbound.write(.text(JSONValue.object(["id": .int(id), "method": .string(method), "params": .object(params)]).description))
        return try await withThrowingTaskGroup(of: JSONValue.self) { group in
            group.addTask { try await self.answer(id, method) }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw Failure(description: "\(method): no answer within \(timeout)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    private func answer(_ id: Int64, _ method: String) async throws -> JSONValue {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                state.withLock { state in
                    if let early = state.early.removeValue(forKey: id) {
                        continuation.resume(with: early)
                    } else if let closed = state.closed {
                        continuation.resume(throwing: closed)
                    } else if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        state.waiting[id] = continuation
                    }
                }
            }
        } onCancel: {
            state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }

    /// One message from Chromium: an answer to a command, or an event.
    func receive(_ text: String) {
        guard let message = try? JSONValue.parse(Data(text.utf8)) else { return }
        if case .int(let id)? = message["id"] {
            let outcome: Result<JSONValue, any Error> =
                message["error"].map {
                    .failure(Failure(description: "DevTools error: \($0)"))
                } ?? .success(message["result"] ?? .null)
            let waiter = state.withLock { state in
                let waiter = state.waiting.removeValue(forKey: id)
                if waiter == nil { state.early[id] = outcome }
                return waiter
            }
            waiter?.resume(with: outcome)
        } else if let method = message["method"]?.string {
            state.withLock { state in
                if state.recording.contains(method) { state.events.append(Event(method: method, params: message["params"] ?? .null)) }
            }
        }
    }

    /// The connection ended: every caller still waiting gets `error`.
    func close(_ error: any Error) {
        let waiters = state.withLock { state in
            state.closed = error
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    /// Keeps events of these methods from now on (the domain must be enabled too).
    func record(_ methods: Set<String>) {
        state.withLock { $0.recording.formUnion(methods) }
    }

    /// The events recorded so far, oldest first.
    var events: [Event] { state.withLock { $0.events } }

    /// The value of a JavaScript expression (a promise is awaited).
    func evaluate(_ expression: String) async throws -> JSONValue {
        let answer = try await send("Runtime.evaluate", ["expression": .string(expression), "returnByValue": true, "awaitPromise": true])
        if let exception = answer["exceptionDetails"] {
            throw Failure(description: "JavaScript threw: \(exception["exception"]?["description"] ?? exception)")
        }
        return answer["result"]?["value"] ?? .null
    }

    func screenshot(to path: String) async throws {
        let data = try await send("Page.captureScreenshot", ["format": "png"])["data"]?.string ?? ""
        try Data(base64Encoded: data)?.write(to: URL(fileURLWithPath: path))
    }

    /// Calls `probe` every 100 ms until it returns a value, at most `timeout`.
    func poll<T>(timeout: Duration, _ probe: () async throws -> T?) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let value = try await probe() { return value }
            try await Task.sleep(for: .milliseconds(100))
        }
        if let value = try await probe() { return value }
        throw Failure(description: "timed out after \(timeout)")
    }
}

/// Driving the page as a person would: the real controls, with the DOM events a browser sends.
extension Page {
    /// `text` as a JavaScript string literal.
    static func literal(_ text: String) -> String { JSONValue.string(text).description }

    /// Clicks the element `selector` finds once it is there and enabled (at most `timeout`).
    func click(_ selector: String, timeout: Duration = .seconds(10)) async throws {
        let script = """
            (e => !e ? "missing" : e.disabled ? "disabled" : (e.click(), "clicked"))(document.querySelector(\(Self.literal(selector))))
            """
        var last = JSONValue.null
        do {
            _ = try await poll(timeout: timeout) { () async throws -> Bool? in
                last = (try? await evaluate(script)) ?? .null
                return last == "clicked" ? true : nil
            }
        } catch {
            throw Failure(description: "cannot click \(selector): \(last)")
        }
    }

    /// Types into a text field: focuses it, sets its value and sends `input`, as typing does.
    func type(_ text: String, into selector: String) async throws {
        let result = try await evaluate(
            """
            (e => { if (!e) return "missing"; e.focus(); e.value = \(Self.literal(text));
              e.dispatchEvent(new Event("input", { bubbles: true })); return "typed"; })(document.querySelector(\(Self.literal(selector))))
            """)
        guard result == "typed" else { throw Failure(description: "cannot type into \(selector): \(result)") }
    }

    /// Chooses `value` in a select element and sends `change`.
    func choose(_ value: String, in selector: String) async throws {
        let result = try await evaluate(
            """
            (e => { if (!e) return "missing"; e.value = \(Self.literal(value));
              e.dispatchEvent(new Event("change", { bubbles: true })); return e.value; })(document.querySelector(\(Self.literal(selector))))
            """)
        guard result == .string(value) else { throw Failure(description: "cannot choose \(value) in \(selector): \(result)") }
    }

    /// The text of the element `selector` finds, or nil when there is none.
    func text(_ selector: String) async throws -> String? {
        try await evaluate("(e => e ? e.textContent : null)(document.querySelector(\(Self.literal(selector))))").string
    }

    /// Whether `selector` finds an element that is rendered (not hidden by itself or an ancestor).
    func isVisible(_ selector: String) async throws -> Bool {
        try await evaluate("(e => !!e && e.getClientRects().length > 0)(document.querySelector(\(Self.literal(selector))))") == true
    }

    /// Polls `expression` until it evaluates to `expected` (at most `timeout`); until then it
    /// may also throw (the page is still loading).
    func waitFor(_ expression: String, toBe expected: JSONValue, timeout: Duration = .seconds(20)) async throws {
        var last = "nothing"
        do {
            _ = try await poll(timeout: timeout) { () async throws -> Bool? in
                do {
                    let value = try await evaluate(expression)
                    last = "\(value)"
                    return value == expected ? true : nil
                } catch let error as Failure {
                    last = error.description
                    return nil
                }
            }
        } catch {
            throw Failure(description: "\(expression) stayed \(last), not \(expected)")
        }
    }
}
