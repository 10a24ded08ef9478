import Foundation
import Testing
@testable import HaulDaemon

/// The daemon's own JSON reader, held against Foundation's `JSONDecoder` (the reader it
/// replaced) on the documents JSON-RPC clients send and on broken ones.
@Suite struct JSONParserTests {
    static func foundation(_ text: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    @Test(arguments: [
        #"{"jsonrpc":"2.0","id":"1","method":"aria2.addUri","params":["token:s",["http://h/a b"],{"pause":"true","dir":"/tmp"}]}"#,
        #"[{"methodName":"aria2.tellStatus","params":["2089b05ecca3d829"]},{"methodName":"system.listMethods"}]"#,
        #" [ 1 , -2 , 0 , 3.5 , -0.25e-3 , 9223372036854775807 , -9223372036854775808 , 9223372036854775808 ] "#,
        #"{"a":true,"b":false,"c":null,"d":[],"e":{},"f":"","g":[[[{}]]]}"#,
        #""\"\\\/\b\f\n\r\t \u00e9\u4e2d \ud83d\ude00 é中😀""#,
        "\t\n\r 42 \n",
    ])
    func readsWhatFoundationReads(_ text: String) throws {
        #expect(try JSONValue.parse(Data(text.utf8)) == Self.foundation(text))
    }

    @Test func aRepeatedNameKeepsItsLastValue() throws {
        #expect(try JSONValue.parse(Data(#"{"dup":1,"dup":2}"#.utf8)) == ["dup": 2])
    }

    @Test func numbersKeepTheirKind() throws {
        #expect(try JSONValue.parse(Data("12".utf8)) == .int(12))
        #expect(try JSONValue.parse(Data("-0".utf8)) == .int(0))
        #expect(try JSONValue.parse(Data("1.0".utf8)) == .double(1))
        #expect(try JSONValue.parse(Data("1e2".utf8)) == .double(100))
        #expect(try JSONValue.parse(Data("3.0".utf8)).integer == 3)
        // Past Int64: a double, as JSONDecoder gave.
        #expect(try JSONValue.parse(Data("18446744073709551616".utf8)) == .double(18_446_744_073_709_551_616))
    }

    @Test(arguments: [
        "", " ", "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{1:2}", "[", "{", "\"abc", "tru", "nul", "01", "1.",
        "-", "1e", "+1", ".5", "[1]x", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\ud800\\u0041\"", "\"\\udc00\"",
        "\"a\u{01}b\"", "NaN", "[Infinity]",
    ])
    func refusesWhatIsNotJSON(_ text: String) {
        #expect(throws: JSONParser.SyntaxError.self) { try JSONValue.parse(Data(text.utf8)) }
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: JSONParser.SyntaxError.self) { try JSONValue.parse(Data([0x22, 0xC3, 0x28, 0x22])) }
        #expect(throws: JSONParser.SyntaxError.self) { try JSONValue.parse(Data([0x22, 0x5C, 0x6E, 0xFF, 0x22])) }
    }

    @Test func boundsTheNesting() throws {
        let deepest = String(repeating: "[", count: JSONParser.maximumDepth) + String(repeating: "]", count: JSONParser.maximumDepth)
        #expect(try JSONValue.parse(Data(deepest.utf8)).array != nil)
        // A hostile body of a million brackets is an error, not a stack overflow.
        let hostile = String(repeating: "[", count: 1_000_000)
        let error = #expect(throws: JSONParser.SyntaxError.self) { try JSONValue.parse(Data(hostile.utf8)) }
        #expect(error?.description == "nested more than 512 deep at byte 512")
    }

    @Test func readsAByteBufferViewAndANonContiguousSequence() throws {
        let text = #"{"k":["v",1]}"#
        let expected: JSONValue = ["k": ["v", 1]]
        #expect(try JSONValue.parse(Array(text.utf8)) == expected)
        // DispatchData in two pieces is not contiguous: read through a copy.
        var joined = DispatchData.empty
        for part in [#"{"k":["#, #""v",1]}"#] {
            part.utf8CString.withUnsafeBytes { joined.append(UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
        }
        #expect(try JSONValue.parse(joined) == expected)
    }
}
