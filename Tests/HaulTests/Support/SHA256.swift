import Foundation
import Crypto

func sha256Hex(_ bytes: [UInt8]) -> String {
    SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
}

/// A short stand-in for a byte array in expectations, so a failure prints 64 characters,
/// not megabytes.
func digest(_ bytes: [UInt8]?) -> String {
    bytes.map { "\($0.count) bytes, sha-256 \(sha256Hex($0))" } ?? "no file"
}
