/// A sorted set with positions: insert, remove, "which position is this" and "what is at
/// position k" in O(log n + B), B being a chunk size (the elements live in sorted chunks of at
/// most `2B`, as in a B-tree's leaves, and the chunks' counts are summed as needed).
///
/// The manager's waiting and stopped lists are these, so `tellWaiting(50000, 100)` costs a
/// page, not the queue.
struct RankedSet<Element: Comparable> {
    /// Each chunk sorted and non-empty; chunk i's elements all come before chunk i+1's.
    private var chunks: [[Element]] = []
    /// Element counts of the chunks, as a Fenwick tree (1-based), so prefix sums take O(log n).
    private var tree: [Int] = [0]
    private(set) var count = 0

    static var chunkSize: Int { 256 }

    var isEmpty: Bool { count == 0 }

    /// Inserts `element`; false when it was already there.
    @discardableResult
    mutating func insert(_ element: Element) -> Bool {
        guard !chunks.isEmpty else {
            chunks = [[element]]
            rebuildTree()
            count = 1
            return true
        }
        let chunk = chunkIndex(for: element)
        let slot = Self.lowerBound(chunks[chunk], element)
        if slot < chunks[chunk].count, chunks[chunk][slot] == element { return false }
        chunks[chunk].insert(element, at: slot)
        count += 1
        if chunks[chunk].count > 2 * Self.chunkSize {
            let back = Array(chunks[chunk][Self.chunkSize...])
            chunks[chunk].removeSubrange(Self.chunkSize...)
            chunks.insert(back, at: chunk + 1)
            rebuildTree()
        } else {
            add(1, at: chunk)
        }
        return true
    }

    /// Removes `element`; false when it was not there.
    @discardableResult
    mutating func remove(_ element: Element) -> Bool {
        guard !chunks.isEmpty else { return false }
        let chunk = chunkIndex(for: element)
        let slot = Self.lowerBound(chunks[chunk], element)
        guard slot < chunks[chunk].count, chunks[chunk][slot] == element else { return false }
        chunks[chunk].remove(at: slot)
        count -= 1
        if chunks[chunk].isEmpty {
            chunks.remove(at: chunk)
            rebuildTree()
        } else {
            add(-1, at: chunk)
        }
        return true
    }

    func contains(_ element: Element) -> Bool {
        guard !chunks.isEmpty else { return false }
        let chunk = chunkIndex(for: element)
        let slot = Self.lowerBound(chunks[chunk], element)
        return slot < chunks[chunk].count && chunks[chunk][slot] == element
    }

    /// The position of `element` (0 first), or nil when it is not there.
    func rank(of element: Element) -> Int? {
        guard !chunks.isEmpty else { return nil }
        let chunk = chunkIndex(for: element)
        let slot = Self.lowerBound(chunks[chunk], element)
        guard slot < chunks[chunk].count, chunks[chunk][slot] == element else { return nil }
        return prefix(chunk) + slot
    }

    /// How many elements come before `element`, whether or not it is there.
    func count(before element: Element) -> Int {
        guard !chunks.isEmpty else { return 0 }
        let chunk = chunkIndex(for: element)
        return prefix(chunk) + Self.lowerBound(chunks[chunk], element)
    }

    /// The element at `position` (0 first).
    subscript(position: Int) -> Element {
        precondition(position >= 0 && position < count, "position \(position) out of 0..<\(count)")
        let (chunk, slot) = locate(position)
        return chunks[chunk][slot]
    }

    /// Up to `limit` elements from `position` on, in order.
    func elements(from position: Int, limit: Int) -> [Element] {
        guard position >= 0, position < count, limit > 0 else { return [] }
        var (chunk, slot) = locate(position)
        var result: [Element] = []
        result.reserveCapacity(min(limit, count - position))
        while result.count < limit, chunk < chunks.count {
            let take = min(limit - result.count, chunks[chunk].count - slot)
            result.append(contentsOf: chunks[chunk][slot..<slot + take])
            chunk += 1
            slot = 0
        }
        return result
    }

    var first: Element? { chunks.first?.first }
    var last: Element? { chunks.last?.last }

    /// The chunk `element` belongs in: the first whose last element is not smaller.
    private func chunkIndex(for element: Element) -> Int {
        var low = 0
        var high = chunks.count - 1
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle].last! < element { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func lowerBound(_ chunk: [Element], _ element: Element) -> Int {
        var low = 0
        var high = chunk.count
        while low < high {
            let middle = (low + high) / 2
            if chunk[middle] < element { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The chunk and slot of `position`: a descent of the Fenwick tree.
    private func locate(_ position: Int) -> (chunk: Int, slot: Int) {
        var index = 0
        var left = position
        var step = 1
        while step * 2 < tree.count { step *= 2 }
        while step > 0 {
            let next = index + step
            if next < tree.count, tree[next] <= left {
                index = next
                left -= tree[next]
            }
            step /= 2
        }
        return (index, left)
    }

    /// Elements in the chunks before `chunk`.
    private func prefix(_ chunk: Int) -> Int {
        var sum = 0
        var index = chunk
        while index > 0 {
            sum += tree[index]
            index -= index & -index
        }
        return sum
    }

    private mutating func add(_ delta: Int, at chunk: Int) {
        var index = chunk + 1
        while index < tree.count {
            tree[index] += delta
            index += index & -index
        }
    }

    /// O(number of chunks): only when chunks split or vanish, once every B changes or so.
    private mutating func rebuildTree() {
        tree = [Int](repeating: 0, count: chunks.count + 1)
        for (chunk, elements) in chunks.enumerated() {
            var index = chunk + 1
            while index < tree.count {
                tree[index] += elements.count
                index += index & -index
            }
        }
    }
}
