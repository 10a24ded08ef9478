import Foundation
import GRDB

extension Store {
    /// The settings kept for `queue`, by name (migration v5's `setting` table).
    func settings(queue: String) async throws(DownloadError) -> [String: String] {
        try await read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT name, value FROM setting WHERE queue = ?", arguments: [queue])
            return Dictionary(rows.map { ($0["name"] as String, $0["value"] as String) }, uniquingKeysWith: { _, last in last })
        }
    }

    /// Sets these settings of `queue` (each replacing its earlier value), in one transaction.
    func saveSettings(_ settings: [String: String], queue: String) async throws(DownloadError) {
        guard !settings.isEmpty else { return }
        try await write { db in
            for (name, value) in settings {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO setting (queue, name, value) VALUES (?, ?, ?)",
                    arguments: [queue, name, value])
            }
        }
    }

    /// Removes these settings of `queue`, in one transaction.
    func removeSettings(_ names: [String], queue: String) async throws(DownloadError) {
        guard !names.isEmpty else { return }
        try await write { db in
            for name in names {
                try db.execute(sql: "DELETE FROM setting WHERE queue = ? AND name = ?", arguments: [queue, name])
            }
        }
    }
}
