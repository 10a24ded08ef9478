import Foundation

/// A method's positional parameters (the token already taken off), read with aria2's rules
/// and its messages (the index counts from 0 after the token).
struct Parameters {
    let values: [JSONValue]

    var count: Int { values.count }

    func value(_ index: Int) throws(RPCError) -> JSONValue {
        guard index < values.count else { throw .failed("The parameter at \(index) is required but missing.") }
        return values[index]
    }

    func wrongType(_ index: Int) -> RPCError { .failed("The parameter at \(index) has wrong type.") }

    func string(_ index: Int) throws(RPCError) -> String {
        guard let text = try value(index).string else { throw wrongType(index) }
        return text
    }

    /// A GID: up to 16 hex digits (a shorter one is a prefix).
    func gid(_ index: Int) throws(RPCError) -> String {
        let text = try string(index)
        guard (1...16).contains(text.count), text.allSatisfy(\.isHexDigit) else { throw .failed("Invalid GID \(text)") }
        return text.lowercased()
    }

    func int(_ index: Int) throws(RPCError) -> Int {
        guard case .int(let number) = try value(index), let int = Int(exactly: number) else { throw wrongType(index) }
        return int
    }

    func strings(_ index: Int) throws(RPCError) -> [String] {
        guard let list = try value(index).array else { throw wrongType(index) }
        return try list.map { item throws(RPCError) in
            guard let text = item.string else { throw wrongType(index) }
            return text
        }
    }

    func object(_ index: Int) throws(RPCError) -> [String: JSONValue]? {
        guard index < values.count else { return nil }
        guard let object = values[index].object else { throw wrongType(index) }
        return object
    }

    /// The optional `keys` filter at `index`.
    func keys(_ index: Int) throws(RPCError) -> [String]? {
        guard index < values.count else { return nil }
        return try strings(index)
    }
}
