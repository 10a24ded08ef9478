/// A JSON-RPC error answer: `{"code": …, "message": …}`.
///
/// aria2 answers every failure of a method with code 1 and a one-line message; the JSON-RPC
/// codes below 0 are for requests that never reached a method.
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    public var message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    /// A method failed (aria2's code 1).
    public static func failed(_ message: String) -> RPCError { RPCError(code: 1, message: message) }

    public static let parseError = RPCError(code: -32700, message: "Parse error.")
    public static let invalidRequest = RPCError(code: -32600, message: "Invalid Request.")
    public static let invalidParams = RPCError(code: -32602, message: "Invalid params.")
    public static let unauthorized = RPCError.failed("Unauthorized")

    /// aria2 answers an unknown method with code 1, not JSON-RPC's -32601.
    static func noSuchMethod(_ name: String) -> RPCError { .failed("No such method: \(name)") }

    static func notFound(_ gid: String) -> RPCError { .failed("GID \(gid) is not found") }

    /// The HTTP status aria2 sends with the error: 500 for a body it cannot read, else 400.
    var httpStatus: Int { code == -32700 || code == -32602 ? 500 : 400 }

    var json: JSONValue { ["code": .int(Int64(code)), "message": .string(message)] }

    public var description: String { message }
}
