/// The manager's downloads by id: the entries packed in chunks of ``chunkSize``, and an id →
/// slot map.
///
/// A `[ID: Entry]` of 100,000 entries of ~340 bytes keeps 262,144 buckets (its load factor
/// stays under 3/4), 90 MB, and while it grows holds the old buckets too: 135 MB at the peak.
/// Here the entries take what they fill plus at most one chunk, grow a chunk at a time, and only
/// the small map of slots doubles.
struct EntryTable: Sequence {
    typealias Entry = DownloadManager.Entry

    static let chunkSize = 1024

    /// Every slot holds an entry; optional so that the subscript can hand out the entry in
    /// place (its address, `_modify`) rather than a copy of its ~250 bytes and the retains of its
    /// references, for every look at or change of a running download.
    private var chunks: [ContiguousArray<Entry?>] = []
    private var slots: [DownloadID: Int32] = [:]
    /// The last chunk emptied, kept for the next: an access to an id without an entry while the
    /// last chunk is full adds a chunk and takes it back at once, and would allocate one each time.
    private var spare: ContiguousArray<Entry?>?
    /// What a look for an unknown id sees.
    private let absent: ContiguousArray<Entry?> = [nil]

    var count: Int { slots.count }

    /// Whether `id` has an entry (without looking at the entry).
    func contains(_ id: DownloadID) -> Bool { slots[id] != nil }
    var isEmpty: Bool { slots.isEmpty }
    var keys: Dictionary<DownloadID, Int32>.Keys { slots.keys }

    subscript(id: DownloadID) -> Entry? {
        // An array's getter copies the element it returns, and a `_read` that yields it lends
        // that copy: the address of the slot lends the entry itself. It stays valid while the
        // access lasts, since nothing can change the table meanwhile.
        unsafeAddress {
            guard let slot = slots[id] else { return absent.withUnsafeBufferPointer { $0.baseAddress! } }
            return chunks[Int(slot) / Self.chunkSize].withUnsafeBufferPointer { $0.baseAddress! + Int(slot) % Self.chunkSize }
        }
        // One yield, inlined where it is used: a coroutine that is called gets its frame from
        // `malloc` when the frame is larger than the few words its caller lends it, and this
        // one's was 2,000 bytes, allocated and freed for every change of an entry (eleven a
        // download). An id without an entry gets an empty slot for the access, taken back
        // after it unless an entry was put there.
        @inline(__always)
        _modify {
            let slot = slots[id].map(Int.init) ?? appendEmptySlot(for: id)
            yield &chunks[slot / Self.chunkSize][slot % Self.chunkSize]
            // Looked at where it is (the array's getter would copy it).
            let emptied = chunks[slot / Self.chunkSize].withUnsafeBufferPointer { chunk in
                if case .none = chunk.baseAddress![slot % Self.chunkSize] { true } else { false }
            }
            if emptied { removeValue(forKey: id) }
        }
    }

    /// A slot for `id` at the end, empty; its index.
    @inline(never)
    private mutating func appendEmptySlot(for id: DownloadID) -> Int {
        if chunks.last.map({ $0.count == Self.chunkSize }) ?? true {
            var chunk = spare ?? ContiguousArray<Entry?>()
            spare = nil
            chunk.reserveCapacity(Self.chunkSize)
            chunks.append(chunk)
        }
        let slot = (chunks.count - 1) * Self.chunkSize + chunks[chunks.count - 1].count
        slots[id] = Int32(slot)
        chunks[chunks.count - 1].append(nil)
        return slot
    }

    /// Removes the entry for `id` (the last entry moves into its slot) and returns it.
    @discardableResult @inline(never)
    mutating func removeValue(forKey id: DownloadID) -> Entry? {
        guard let slot = slots.removeValue(forKey: id).map(Int.init) else { return nil }
        let last = chunks.count - 1
        guard let lastEntry = chunks[last].popLast() else { return nil }
        if chunks[last].isEmpty { spare = chunks.removeLast() }
        let lastSlot = last * Self.chunkSize + (chunks.count > last ? chunks[last].count : 0)
        if slot == lastSlot { return lastEntry }
        let removed = chunks[slot / Self.chunkSize][slot % Self.chunkSize]
        chunks[slot / Self.chunkSize][slot % Self.chunkSize] = lastEntry
        if let moved = lastEntry?.id { slots[moved] = Int32(slot) }
        return removed
    }

    func makeIterator() -> AnyIterator<(key: DownloadID, value: Entry)> {
        var chunkIndex = 0
        var index = 0
        return AnyIterator {
            while chunkIndex < chunks.count {
                if index < chunks[chunkIndex].count {
                    let entry = chunks[chunkIndex][index]
                    index += 1
                    if let entry { return (entry.id, entry) }
                    continue
                }
                chunkIndex += 1
                index = 0
            }
            return nil
        }
    }
}
