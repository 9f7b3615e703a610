import SessionKitOAuth

/// The entries of a ``ResponseCache``: a byte-bounded, least-recently-used store of response variants.
///
/// A value type with no locking and no clock, so its bookkeeping is tested directly. Entries live in slots of
/// one array threaded by a doubly-linked recency list of slot indices, so touching, inserting and evicting
/// are O(1); a URI's variants (one per distinct set of selecting request fields) are found through a dictionary
/// and number at most ``maximumVariantsPerKey``.
struct ResponseCacheStorage {
    /// How many variants of one URI are kept; a new one beyond that evicts the URI's least recently used.
    static let maximumVariantsPerKey = 8

    private struct Slot {
        var key: ResponseCacheKey
        var entry: ResponseCacheEntry?
        /// Towards the most recently used end; -1 at the end.
        var newer: Int
        /// Towards the least recently used end; -1 at the end.
        var older: Int
        /// The value of ``useCounter`` when last touched: orders one key's variants without walking the list.
        var lastUse: UInt64
    }

    let maximumBytes: Int
    private(set) var totalBytes = 0
    private(set) var count = 0
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    /// Slot indices of each key's variants, oldest stored first.
    private var variants: [ResponseCacheKey: [Int]] = [:]
    private var newest = -1
    private var oldest = -1
    private var useCounter: UInt64 = 0

    init(maximumBytes: Int) {
        self.maximumBytes = max(0, maximumBytes)
    }

    /// The slots of `key`'s variants, most recently stored first.
    func slots(for key: ResponseCacheKey) -> [Int] {
        variants[key]?.reversed() ?? []
    }

    func entry(at slot: Int) -> ResponseCacheEntry? {
        slots[slot].entry
    }

    /// Marks the entry in `slot` as the most recently used.
    mutating func touch(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        linkAsNewest(slot)
    }

    /// Stores `entry` under `key` as its newest variant, then evicts least recently used entries until the
    /// byte bound holds again (the new entry included, if it alone is over the bound).
    mutating func insert(_ entry: ResponseCacheEntry, for key: ResponseCacheKey) {
        let slot: Int
        let record = Slot(key: key, entry: entry, newer: -1, older: -1, lastUse: 0)
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = record
        } else {
            slot = slots.count
            slots.append(record)
        }
        linkAsNewest(slot)
        variants[key, default: []].append(slot)
        totalBytes += entry.cost
        count += 1
        if let keySlots = variants[key], keySlots.count > Self.maximumVariantsPerKey {
            // The key's least recently used variant: the one furthest from the newest end.
            if let victim = keySlots.min(by: { slots[$0].lastUse < slots[$1].lastUse }) {
                remove(victim)
            }
        }
        while totalBytes > maximumBytes, oldest != -1 {
            remove(oldest)
        }
    }

    /// Replaces the entry in `slot` (after a validation) and marks it most recently used.
    mutating func replace(_ slot: Int, with entry: ResponseCacheEntry) {
        guard let old = slots[slot].entry else { return }
        slots[slot].entry = entry
        totalBytes += entry.cost - old.cost
        touch(slot)
        while totalBytes > maximumBytes, oldest != -1 {
            remove(oldest)
        }
    }

    mutating func remove(_ slot: Int) {
        guard let entry = slots[slot].entry else { return }
        let key = slots[slot].key
        unlink(slot)
        slots[slot].entry = nil
        freeSlots.append(slot)
        totalBytes -= entry.cost
        count -= 1
        if var keySlots = variants[key] {
            keySlots.removeAll { $0 == slot }
            variants[key] = keySlots.isEmpty ? nil : keySlots
        }
    }

    mutating func removeAll(for key: ResponseCacheKey) {
        for slot in variants[key] ?? [] {
            remove(slot)
        }
    }

    mutating func removeAll() {
        self = ResponseCacheStorage(maximumBytes: maximumBytes)
    }

    /// Keys from least to most recently used, for tests.
    var keysByRecency: [ResponseCacheKey] {
        var keys: [ResponseCacheKey] = []
        var slot = oldest
        while slot != -1 {
            keys.append(slots[slot].key)
            slot = slots[slot].newer
        }
        return keys
    }

    // MARK: - Recency list

    private mutating func unlink(_ slot: Int) {
        let newer = slots[slot].newer
        let older = slots[slot].older
        if newer != -1 { slots[newer].older = older } else { newest = older }
        if older != -1 { slots[older].newer = newer } else { oldest = newer }
        slots[slot].newer = -1
        slots[slot].older = -1
    }

    private mutating func linkAsNewest(_ slot: Int) {
        useCounter += 1
        slots[slot].lastUse = useCounter
        slots[slot].older = newest
        slots[slot].newer = -1
        if newest != -1 { slots[newest].newer = slot }
        newest = slot
        if oldest == -1 { oldest = slot }
    }
}
