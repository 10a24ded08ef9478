import GRDB
import NIOCore
import PostgresNIO

/// One column of a batch of rows, as a PostgreSQL array of `bigint`, `double precision` or
/// `text` that may hold NULLs (PostgresNIO's arrays hold none). In the binary format: the
/// dimensions, whether a NULL is among the elements, their type, the length and first index,
/// then each element's length (-1 for NULL) and bytes.
struct ColumnArray: PostgresThrowingDynamicTypeEncodable {
    enum Element {
        case bigint, double, text

        init(sqlType: String) {
            switch sqlType {
            case "bigint": self = .bigint
            case "double precision": self = .double
            default: self = .text
            }
        }
    }

    var type: Element
    var values: [DatabaseValue]

    var psqlType: PostgresDataType {
        switch type {
        case .bigint: .int8Array
        case .double: .float8Array
        case .text: .textArray
        }
    }

    var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) throws {
        let element: PostgresDataType =
            switch type {
            case .bigint: .int8
            case .double: .float8
            case .text: .text
            }
        buffer.writeInteger(Int32(1))
        buffer.writeInteger(Int32(values.contains { $0.isNull } ? 1 : 0))
        buffer.writeInteger(element.rawValue)
        buffer.writeInteger(Int32(values.count))
        buffer.writeInteger(Int32(1))
        for value in values {
            switch (value.storage, type) {
            case (.null, _): buffer.writeInteger(Int32(-1))
            case (.int64(let number), .bigint):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(number)
            case (.double(let number), .double):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(number.bitPattern)
            case (.int64(let number), .double):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(Double(number).bitPattern)
            case (.string(let text), .text):
                buffer.writeInteger(Int32(text.utf8.count))
                buffer.writeString(text)
            case (.int64(let number), .text):
                let text = String(number)
                buffer.writeInteger(Int32(text.utf8.count))
                buffer.writeString(text)
            default: throw DownloadError.io("a value of type \(value.storage) does not fit a column of \(type)")
            }
        }
    }
}
