import CHaulSystem
import Foundation
import Synchronization

/// The names in the folders downloads go to, each read once and kept current by inotify:
/// whether a name is taken is then a set lookup instead of an `lstat`.
///
/// Before its first request, a download looks whether its file or part file is already there
/// (it then asks with a HEAD what to resume). In a folder of many thousand names each `lstat`
/// of a free name is a search of a directory block; with two per file it was the largest cost
/// of a list of small files after the transfer itself. The answer here is as current as an
/// `lstat`'s: the kernel queues a folder's changes as they happen, and every question first
/// reads what is queued. Where inotify is not available, or more than ``maxFolders`` folders
/// are asked about, the caller looks itself. So it does for a folder on a file system that other
/// machines write to as well (NFS, SMB, FUSE, Ceph…): inotify hears only this machine's own
/// changes there, and a fleet's daemons sharing one download folder would miss each other's
/// files (a part file left by a daemon that was killed, which its successor continues).
///
/// A watch has a price of its own: when the process ends, the kernel tears the watches down and
/// waits until nothing can still be reading them (an RCU grace period). A one-file `haul get`
/// took 34 ms with its folder watched and 24 ms without. So nothing is watched until
/// ``questionsBeforeWatching`` questions were asked: a run of a few files looks with `lstat`.
///
/// A listing keeps a 64-bit digest of each name's bytes, not the name: 8 bytes a name instead
/// of a string (which for a name of more than 15 bytes is an allocation of its own). A name
/// whose digest is missing is not there; one whose digest is present is looked up with
/// `lstat`, which also settles a collision. That is rare in the case this is for, new names.
final class FolderListings: Sendable {
    /// Digests of the names of one folder, counted where two names share one, so that
    /// removing either leaves the digest in place.
    private struct Digests {
        private var single = Set<Int>()
        /// How many names share a digest, for digests of more than one name.
        private var shared: [Int: Int] = [:]

        func contains(_ digest: Int) -> Bool { single.contains(digest) }

        mutating func insert(_ digest: Int) {
            if !single.insert(digest).inserted { shared[digest, default: 1] += 1 }
        }

        mutating func remove(_ digest: Int) {
            if let names = shared[digest] {
                shared[digest] = names > 2 ? names - 1 : nil
            } else {
                single.remove(digest)
            }
        }
    }

    private struct Listing {
        var path: String
        var names: Digests
    }

    private struct State {
        /// The inotify descriptor; -1 when it could not be made.
        var descriptor: Int32
        var listings: [Int32: Listing] = [:]
        var watches: [String: Int32] = [:]
        /// Folders that could not be watched (asked again only after a failure elsewhere).
        var unwatchable: Set<String> = []
        /// Questions left to the caller before the first watch is made.
        var questionsUnwatched: Int
        /// What the kernel's queue is read into: one for the life of the listings, not an
        /// allocation for each question (two a file).
        let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: FolderListings.readSize, alignment: 8)
    }

    /// The bytes of inotify events read at once.
    private static let readSize = 8 << 10

    /// Folders kept at once: a list goes to one folder, a daemon's queue to a few, a mirror to
    /// every folder of its tree (a watch is about a kilobyte of the kernel's memory, of the
    /// user's `fs.inotify.max_user_watches`; past the limit the caller looks itself).
    static let maxFolders = 256

    /// Questions answered by the caller's own `lstat` before anything is watched: a one-file
    /// run makes no watch and so pays nothing for it at its end, while a list of many files
    /// into one folder is watched from its seventeenth.
    static let questionsBeforeWatching = 16

    private static let events =
        UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
        | UInt32(IN_ONLYDIR) | UInt32(IN_EXCL_UNLINK)

    private let state: Mutex<State>
    private let digest: @Sendable (UnsafeRawBufferPointer) -> Int
    private let isShared: @Sendable (String) -> Bool

    /// - Parameters:
    ///   - digest: the digest of a name's bytes (a test passes one that collides).
    ///   - isShared: whether a folder is on a file system other machines change too.
    ///   - questionsBeforeWatching: questions left to the caller before the first watch.
    init(
        digest: @escaping @Sendable (UnsafeRawBufferPointer) -> Int = FolderListings.standardDigest,
        isShared: @escaping @Sendable (String) -> Bool = FolderListings.isOnSharedFileSystem,
        questionsBeforeWatching: Int = FolderListings.questionsBeforeWatching
    ) {
        state = Mutex(State(descriptor: inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)), questionsUnwatched: questionsBeforeWatching))
        self.digest = digest
        self.isShared = isShared
    }

    /// Whether `folder` is on a network or user-space file system, whose changes made elsewhere
    /// inotify does not report.
    @Sendable static func isOnSharedFileSystem(_ folder: String) -> Bool {
        let type = haul_file_system_type(folder)
        return type != -1 && isShared(fileSystemType: Int64(type))
    }

    /// The `statfs` magic numbers of the file systems changed from more than one machine (or by
    /// a user-space process inotify does not hear): NFS, SMB, CIFS, SMB2, FUSE, Ceph, 9P, AFS,
    /// kAFS, OCFS2, GFS2, Lustre and GPFS.
    static func isShared(fileSystemType type: Int64) -> Bool {
        sharedFileSystemTypes.contains(type & 0xFFFF_FFFF)
    }

    private static let sharedFileSystemTypes: Set<Int64> = [
        0x6969, 0x517B, 0xFF53_4D42, 0xFE53_4D42, 0x6573_5546, 0x00C3_6400, 0x0102_1997, 0x5346_414F,
        0x6B41_4653, 0x7461_636F, 0x0116_1970, 0x0BD0_0BD0, 0x4750_4653,
    ]

    /// The digest of a name's bytes: the standard library's seeded hash, stable for the process.
    @Sendable static func standardDigest(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }

    deinit {
        state.withLock { state in
            if state.descriptor >= 0 { close(state.descriptor) }
            state.readBuffer.deallocate()
        }
    }

    /// Whether `folder` holds an entry (of any kind, as `lstat` sees it) named `name` or
    /// `other`; nil when the folder is not kept here.
    func contains(_ name: String, or other: String, in folder: String) -> Bool? {
        let (first, second) = (digest(of: name), digest(of: other))
        let found = state.withLock { state -> (Bool, Bool)? in
            // A folder that cannot be kept (past the limit, shared) costs no read of the queue:
            // its changes wait for the next question about one that is.
            guard state.descriptor >= 0, state.watches[folder] != nil || Self.mayWatch(folder, state) else { return nil }
            if state.questionsUnwatched > 0 {
                state.questionsUnwatched -= 1
                return nil
            }
            drain(&state)
            guard let watch = state.watches[folder] ?? watch(folder, &state),
                let names = state.listings[watch]?.names
            else { return nil }
            return (names.contains(first), names.contains(second))
        }
        guard let found else { return nil }
        // A digest that is here is most likely its name: the file system says for sure.
        return found.0 && DestinationResolver.exists(folder + "/" + name)
            || found.1 && DestinationResolver.exists(folder + "/" + other)
    }

    private func digest(of name: String) -> Int {
        var name = name
        return name.withUTF8 { digest(UnsafeRawBufferPointer($0)) }
    }

    /// The folders watched now.
    var watchedFolders: Int { state.withLock { $0.watches.count } }

    /// Whether `folder` is not known to be unwatchable and there is room for one more.
    private static func mayWatch(_ folder: String, _ state: State) -> Bool {
        !state.unwatchable.contains(folder) && state.watches.count < maxFolders
    }

    /// Starts watching `folder`, then reads it: a name made in between is both read and
    /// reported, never missed.
    private func watch(_ folder: String, _ state: inout State) -> Int32? {
        guard Self.mayWatch(folder, state) else { return nil }
        guard !isShared(folder) else {
            state.unwatchable.insert(folder)
            return nil
        }
        let watch = inotify_add_watch(state.descriptor, folder, Self.events)
        guard watch >= 0 else {
            // A missing folder is made later by its first download: it may be watched then.
            if errno != ENOENT { state.unwatchable.insert(folder) }
            return nil
        }
        guard let names = names(in: folder) else {
            inotify_rm_watch(state.descriptor, watch)
            return nil
        }
        state.watches[folder] = watch
        state.listings[watch] = Listing(path: folder, names: names)
        return watch
    }

    private func names(in folder: String) -> Digests? {
        guard let directory = opendir(folder) else { return nil }
        defer { closedir(directory) }
        var names = Digests()
        while let entry = readdir(directory) {
            withUnsafeBytes(of: entry.pointee.d_name) { field in
                let name = Self.name(in: field)
                if !name.elementsEqual(".".utf8) && !name.elementsEqual("..".utf8) { names.insert(digest(name)) }
            }
        }
        return names
    }

    /// The name in a fixed-size field of `readdir` or inotify: its bytes up to the first NUL.
    private static func name(in field: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: field[..<(field.firstIndex(of: 0) ?? field.endIndex)])
    }

    /// The size of an inotify event with the longest name (`NAME_MAX`) and its NUL.
    private static let largestEvent = MemoryLayout<inotify_event>.size + Int(NAME_MAX) + 1

    /// Applies every change the kernel queued since the last question.
    private func drain(_ state: inout State) {
        let (buffer, size) = (state.readBuffer, Self.readSize)
        while true {
            let count = read(state.descriptor, buffer.baseAddress, size)
            guard count > 0 else { return }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let event = buffer.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                let field = UnsafeRawBufferPointer(rebasing: buffer[(offset + header)..<(offset + header + Int(event.len))])
                offset += header + Int(event.len)
                apply(event, name: digest(Self.name(in: field)), &state)
            }
            // A read returns every queued event that fits: with room left for the largest one,
            // the queue was empty, and another read would only say so (a system call a file).
            if size - count >= Self.largestEvent { return }
        }
    }

    private func apply(_ event: inotify_event, name: Int, _ state: inout State) {
        let mask = event.mask
        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
            // Changes were lost: read every folder again (the watches still stand).
            for (watch, listing) in state.listings {
                if let names = names(in: listing.path) {
                    state.listings[watch]?.names = names
                } else {
                    forget(watch, &state)
                }
            }
            return
        }
        guard state.listings[event.wd] != nil else { return }
        if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
            // The folder went away or moved: its path no longer leads to what was read.
            forget(event.wd, &state)
        } else if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 {
            state.listings[event.wd]?.names.insert(name)
        } else if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
            state.listings[event.wd]?.names.remove(name)
        }
    }

    private func forget(_ watch: Int32, _ state: inout State) {
        if let listing = state.listings.removeValue(forKey: watch) { state.watches[listing.path] = nil }
        state.watches = state.watches.filter { $0.value != watch }
        inotify_rm_watch(state.descriptor, watch)
    }
}
