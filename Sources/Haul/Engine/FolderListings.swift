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
/// are asked about, the caller looks itself.
final class FolderListings: Sendable {
    private struct Listing {
        var path: String
        var names: Set<String>
    }

    private struct State {
        /// The inotify descriptor; -1 when it could not be made.
        var descriptor: Int32
        var listings: [Int32: Listing] = [:]
        var watches: [String: Int32] = [:]
        /// Folders that could not be watched (asked again only after a failure elsewhere).
        var unwatchable: Set<String> = []
    }

    /// Folders kept at once: a list goes to one folder, a daemon's queue to a few.
    static let maxFolders = 16

    private static let events = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
        | UInt32(IN_ONLYDIR) | UInt32(IN_EXCL_UNLINK)

    private let state: Mutex<State>

    init() {
        state = Mutex(State(descriptor: inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))))
    }

    deinit {
        let descriptor = state.withLock { $0.descriptor }
        if descriptor >= 0 { close(descriptor) }
    }

    /// Whether `folder` holds an entry (of any kind, as `lstat` sees it) named `name` or
    /// `other`; nil when the folder is not kept here.
    func contains(_ name: String, or other: String, in folder: String) -> Bool? {
        state.withLock { state -> Bool? in
            guard state.descriptor >= 0 else { return nil }
            Self.drain(&state)
            guard let watch = state.watches[folder] ?? Self.watch(folder, &state),
                  let names = state.listings[watch]?.names else { return nil }
            return names.contains(name) || names.contains(other)
        }
    }

    /// Starts watching `folder`, then reads it: a name made in between is both read and
    /// reported, never missed.
    private static func watch(_ folder: String, _ state: inout State) -> Int32? {
        guard !state.unwatchable.contains(folder), state.watches.count < maxFolders else { return nil }
        let watch = inotify_add_watch(state.descriptor, folder, events)
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

    private static func names(in folder: String) -> Set<String>? {
        guard let directory = opendir(folder) else { return nil }
        defer { closedir(directory) }
        var names = Set<String>()
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.insert(name) }
        }
        return names
    }

    /// Applies every change the kernel queued since the last question.
    private static func drain(_ state: inout State) {
        let size = 8 << 10
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = read(state.descriptor, buffer.baseAddress, size)
            guard count > 0 else { return }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let event = buffer.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                let nameBytes = UnsafeRawBufferPointer(rebasing: buffer[(offset + header)..<(offset + header + Int(event.len))])
                offset += header + Int(event.len)
                apply(event, name: String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self), &state)
            }
        }
    }

    private static func apply(_ event: inotify_event, name: String, _ state: inout State) {
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

    private static func forget(_ watch: Int32, _ state: inout State) {
        if let listing = state.listings.removeValue(forKey: watch) { state.watches[listing.path] = nil }
        state.watches = state.watches.filter { $0.value != watch }
        inotify_rm_watch(state.descriptor, watch)
    }
}
