#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CHaulSystem
import Crypto
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// The local file an upload reads: opened once, read a chunk at a time at any offset, on NIO's
/// threads for blocking I/O (the few threads that run every transfer's tasks would wait on a
/// slow disk otherwise).
final class UploadFile: Sendable {
    /// What tells whether the file is still the one an upload began with.
    ///
    /// The length and the modification time catch ordinary edits. The sample digest is a
    /// SHA-256 over the length and a bounded sample of the bytes (``sampleBlocks`` blocks of
    /// ``sampleBlockSize``, the first and last included, evenly spread between): a file put back
    /// with its old time (`touch -r`, `rsync -t`, a restore) but other bytes is caught unless
    /// it differs only between the sampled blocks. A digest of every byte already sent would
    /// catch that too, but a resume would first read back all that was sent — minutes of disk
    /// for a large file — and its running hash cannot be saved across a `kill -9` (swift-crypto
    /// does not export a hash's state), so it would have to be recomputed at every checkpoint.
    /// The sample costs at most 4 MiB of reading, whatever the file's size.
    struct Identity: Sendable, Hashable {
        var length: Int64
        /// Seconds since 1970, with the file system's sub-second part.
        var modified: Double
        /// Hex SHA-256 of the sample.
        var sample: String

        /// Why `self`, as recorded, is not the file as it is `now`; nil when it is the same.
        func change(to now: Identity) -> String? {
            if length != now.length { return "its length changed (\(length) → \(now.length) bytes)" }
            if modified != now.modified { return "it was modified" }
            if sample != now.sample { return "its content changed" }
            return nil
        }
    }

    static let sampleBlocks = 64
    static let sampleBlockSize = 64 << 10

    let path: String
    let length: Int64
    let modified: Double
    private let descriptor: Int32

    /// Opens `path` for reading.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when it cannot be opened,
    ///   is not a regular file, or cannot be examined.
    init(path: String) throws(DownloadError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .io("read", path: path, errno: errno) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw .io("examine", path: path, errno: code)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw .io("cannot upload \(path): it is not a regular file", path: path)
        }
        self.path = path
        descriptor = fd
        length = Int64(info.st_size)
        modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    }

    deinit { close(descriptor) }

    /// The file's identity now: its length and time as opened, and the sample's digest.
    func identity() async throws(DownloadError) -> Identity {
        let (length, path, fd) = (self.length, self.path, descriptor)
        let sample = try await offTheEventLoops { () throws(DownloadError) -> String in
            var hash = SHA256()
            withUnsafeBytes(of: length.littleEndian) { hash.update(bufferPointer: $0) }
            var block = [UInt8](repeating: 0, count: Self.sampleBlockSize)
            for start in Self.sampleOffsets(length: length) {
                let wanted = Int(min(Int64(Self.sampleBlockSize), length - start))
                let got = try Self.read(fd, into: &block, count: wanted, at: start, path: path)
                block.withUnsafeBytes { hash.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
            }
            return hash.finalize().map { String(format: "%02x", $0) }.joined()
        }
        return Identity(length: length, modified: modified, sample: sample)
    }

    /// Where the sample's blocks start: the first and last block and evenly spaced ones
    /// between, each block once (a small file is read whole).
    static func sampleOffsets(length: Int64) -> [Int64] {
        let block = Int64(sampleBlockSize)
        guard length > block * Int64(sampleBlocks) else { return Array(stride(from: 0, to: length, by: Int(block))) }
        let last = length - block
        return (0..<sampleBlocks).map { last * Int64($0) / Int64(sampleBlocks - 1) }
    }

    /// Up to `count` bytes from `offset` (fewer only at the end of the file), read into
    /// `spare`'s memory when given and no one else holds it.
    func chunk(at offset: Int64, count: Int, reusing spare: consuming ByteBuffer? = nil) async throws(DownloadError) -> ByteBuffer {
        let (path, fd) = (self.path, descriptor)
        let wanted = Int(max(0, min(Int64(count), length - offset)))
        // Handed over in a box both ways, so that the read below holds the only reference to
        // it, and so does the caller after it: returned through the pool's continuation, the
        // pool's thread could still hold the buffer when the caller gives it back as the next
        // spare, which would then be copied to be written.
        let box = Handover(consume spare)
        try await offTheEventLoops { () throws(DownloadError) in
            var buffer = box.take() ?? ByteBufferAllocator().buffer(capacity: wanted + Self.placementRoom)
            buffer.clear()
            Self.place(&buffer, like: offset, count: wanted)
            var failure: DownloadError?
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted) { raw in
                var done = 0
                while done < wanted {
                    let got = pread(fd, raw.baseAddress! + done, wanted - done, off_t(offset) + off_t(done))
                    if got < 0, errno == EINTR { continue }
                    guard got > 0 else {
                        failure =
                            got < 0
                            ? .io("read", path: path, errno: errno)
                            : .io("cannot upload \(path): it became shorter while being sent", path: path)
                        return done
                    }
                    done += got
                }
                return done
            }
            if let failure { throw failure }
            box.put(buffer)
        }
        guard let chunk = box.take() else { throw .io("cannot read \(path)", path: path) }
        return chunk
    }

    /// Up to `count` bytes from `offset`, read into `buffer` (cleared first; new memory when it
    /// has too little for them and their ``placementRoom``) on the calling thread, only those in
    /// the page cache: no wait on the disk, so an event loop may call it. False when none could
    /// be read that way (not cached, a failure, the end of the file): ``chunk(at:count:reusing:)``
    /// then reads them and says what went wrong.
    func readNow(at offset: Int64, count: Int, into buffer: inout ByteBuffer) -> Bool {
        let fd = descriptor
        if buffer.capacity < count + Self.placementRoom {
            buffer = ByteBufferAllocator().buffer(capacity: count + Self.placementRoom)
        }
        buffer.clear()
        Self.place(&buffer, like: offset, count: count)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
            max(0, haul_pread_nowait(fd, raw.baseAddress, count, offset))
        }
        return buffer.readableBytes > 0
    }

    /// What a chunk's buffer holds beyond its bytes: room to start them where, within 4 KiB,
    /// they lie in the file (``place(_:like:count:)``).
    static let placementRoom = 4096

    /// Starts the empty `buffer`'s bytes, `count` of them to come, where within 4 KiB `offset`
    /// lies in the file.
    ///
    /// The kernel copies a read from the page cache with `rep movsb`, which on AMD's Zen cores
    /// runs at a quarter of its speed when the destination lies 1 to 31 bytes past the source
    /// modulo 4 KiB, as memory from `malloc` (16 bytes into a page) lies past a page-aligned
    /// read. Measured on an AMD EPYC, 1 MiB reads of a cached file: 1.5-2.3 GB/s into such
    /// buffers, 7-10 GB/s at every other place. The bytes skipped are never read; a buffer
    /// without room for them besides the `count` is left as it is.
    static func place(_ buffer: inout ByteBuffer, like offset: Int64, count: Int) {
        let address = buffer.withUnsafeMutableWritableBytes { Int(bitPattern: $0.baseAddress) }
        let span = placementRoom
        let skip = (Int(offset % Int64(span)) - address % span + span) % span
        guard buffer.writableBytes >= skip + count else { return }
        buffer.moveWriterIndex(forwardBy: skip)
        buffer.moveReaderIndex(forwardBy: skip)
    }

    private static func read(_ fd: Int32, into block: inout [UInt8], count: Int, at offset: Int64, path: String) throws(DownloadError) -> Int {
        var done = 0
        while done < count {
            let got = block.withUnsafeMutableBytes { raw in
                pread(fd, raw.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw got < 0 ? .io("read", path: path, errno: errno) : .io("cannot upload \(path): it became shorter", path: path) }
            done += got
        }
        return done
    }
}

/// A buffer passed to another thread and taken there, no reference left behind.
private final class Handover: Sendable {
    private let buffer: Mutex<ByteBuffer?>

    init(_ buffer: consuming ByteBuffer?) { self.buffer = Mutex(buffer) }

    func take() -> ByteBuffer? { buffer.withLock { $0.take() } }

    func put(_ new: ByteBuffer) { buffer.withLock { $0 = new } }
}
