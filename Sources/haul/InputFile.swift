import ArgumentParser
import Foundation

/// `-i FILE`: aria2's input-file format, the subset Haul understands. A line with a URL starts
/// an entry; lines indented by whitespace under it set that entry's options (`out=`, `dir=`,
/// `checksum=`). Blank lines and `#` comments are skipped. Several URLs on a line, separated by
/// tabs, are sources of one file (aria2's mirrors): the download spreads over all of them.
struct InputEntry: Equatable {
    var url: String
    /// The line's other URLs: more sources of the same file.
    var mirrors: [String] = []
    var out: String?
    var dir: String?
    var checksum: String?
    /// A file of a Metalink document (never itself followed as one).
    var fromMetalink = false
}

/// Reads an input file a batch of entries at a time, so a list of a million URLs starts
/// downloading after its first batch and is never held whole in memory.
struct InputFile {
    private let handle: FileHandle
    private let name: String
    /// Bytes read; those before `start` are already split into lines.
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    private var lineNumber = 0
    /// The entry whose option lines may still follow.
    private var current: InputEntry?

    /// Opens `path` ('-' for standard input).
    init(path: String) throws {
        name = path
        if path == "-" {
            handle = FileHandle.standardInput
        } else {
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw ValidationError("cannot read input file \(path): \(String(cString: strerror(errno)))")
            }
            self.handle = handle
        }
    }

    /// Up to `limit` entries; none at the end of the file.
    ///
    /// Only the first entry is waited for: a list still being written (`crawler | haul get -i -`)
    /// hands over what has arrived, and its downloads start while the rest is on its way. An
    /// entry is complete once the line after it has arrived (option lines may follow a URL).
    mutating func next(_ limit: Int) throws -> [InputEntry] {
        var entries: [InputEntry] = []
        while entries.count < limit, let line = try readLine(waiting: entries.isEmpty) {
            lineNumber += 1
            if let finished = try take(line) { entries.append(finished) }
        }
        if entries.count < limit, atEnd, start == buffer.count, let last = current {
            // The end of the file ends the last entry.
            current = nil
            entries.append(last)
        }
        return entries
    }

    /// Every entry of `text` at once (for tests).
    static func parse(_ text: String, name: String) throws -> [InputEntry] {
        var reader = InputFile(text: text, name: name)
        return try reader.next(.max)
    }

    private init(text: String, name: String) {
        handle = FileHandle.nullDevice
        self.name = name
        buffer = Array(text.utf8)
        atEnd = true
    }

    /// One line, entries it completes come back from ``take(_:)``.
    private mutating func take(_ raw: Substring) throws -> InputEntry? {
        if let url = Self.plainURL(raw) {
            let finished = current
            current = InputEntry(url: url)
            return finished
        }
        let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
        let trimmed = Self.trimmingBlanks(line)
        if trimmed.isEmpty || trimmed.hasPrefix("#") { return nil }
        guard line.first == " " || line.first == "\t" else {
            let urls = trimmed.split(separator: "\t").map { String(Self.trimmingBlanks($0)) }.filter { !$0.isEmpty }
            let finished = current
            current = InputEntry(url: urls.first ?? String(trimmed), mirrors: Array(urls.dropFirst()))
            return finished
        }
        guard current != nil, let equals = trimmed.firstIndex(of: "=") else {
            throw ValidationError("\(name):\(lineNumber): expected an indented 'option=value' under a URL line")
        }
        let value = String(trimmed[trimmed.index(after: equals)...])
        switch trimmed[..<equals] {
        case "out": current?.out = value
        case "dir": current?.dir = value
        case "checksum": current?.checksum = value
        case let option:
            throw ValidationError("\(name):\(lineNumber): option '\(option)' is not supported (out, dir, checksum are)")
        }
        return nil
    }

    /// The line when it is what nearly every line of a long list is, one URL and nothing around
    /// it: the rules below would keep it as it is, and looking at its bytes once costs a tenth of
    /// applying them character by character (10,000 lines: 35 ms of CPU). Nil for any other line.
    static func plainURL(_ line: Substring) -> String? {
        var bytes = line.utf8[...]
        if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
        // Printable ASCII at both ends (no blank to trim, not a comment, not an option line),
        // and no tab (which would separate mirrors).
        guard let first = bytes.first, let last = bytes.last, (0x21...0x7E).contains(first), (0x21...0x7E).contains(last),
            first != UInt8(ascii: "#"), !bytes.contains(UInt8(ascii: "\t"))
        else { return nil }
        return String(Substring(bytes))
    }

    /// `line` without the spaces and tabs (and other blanks) around it: Foundation's
    /// `trimmingCharacters(in: .whitespaces)` without its bridge through NSString, which cost a
    /// list a percent of its time.
    static func trimmingBlanks(_ line: Substring) -> Substring {
        func isBlank(_ character: Character) -> Bool {
            character == " " || character == "\t" || (character.isWhitespace && !character.isNewline)
        }
        var trimmed = line
        while let first = trimmed.first, isBlank(first) { trimmed.removeFirst() }
        while let last = trimmed.last, isBlank(last) { trimmed.removeLast() }
        return trimmed
    }

    /// The next line; nil at the end of the input, or, unless `waiting`, when no whole line is
    /// here and no more bytes are ready to read.
    private mutating func readLine(waiting: Bool = true) throws -> Substring? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[start..<newline], as: UTF8.self)
                start = newline + 1
                return line[...]
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = String(decoding: buffer[start...], as: UTF8.self)
                start = buffer.count
                return line[...]
            }
            if !waiting, !isReadable { return nil }
            // Keep only the unfinished line before reading more.
            buffer.removeSubrange(..<start)
            start = 0
            if try !readMore() { atEnd = true }
        }
    }

    /// Whether a read would return at once (a file always; a pipe once bytes or its end arrived).
    private var isReadable: Bool {
        var poller = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, 0) != 0
    }

    /// Appends what one `read` returns, up to 64 KiB, to the buffer: from a pipe, whatever has
    /// arrived (Foundation's `read(upToCount:)` waits for all 64 KiB or the end). False at the end.
    private mutating func readMore() throws -> Bool {
        let (kept, room) = (buffer.count, 1 << 16)
        buffer.append(contentsOf: repeatElement(0, count: room))
        while true {
            let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress! + kept, room) }
            if count >= 0 {
                buffer.removeLast(room - count)
                return count > 0
            }
            guard errno == EINTR else {
                let reason = String(cString: strerror(errno))
                buffer.removeLast(room)
                throw ValidationError("cannot read input file \(name): \(reason)")
            }
        }
    }
}
