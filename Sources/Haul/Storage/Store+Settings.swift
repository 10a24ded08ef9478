import Foundation
import GRDB

extension Store {
    /// The settings kept for `queue`, by name (migration v5's `setting` table).
    func settings(queue: String) async throws(DownloadError) -> [String: String] {
        let settings = try await fetch("SELECT name, value FROM setting WHERE queue = ?", [queue.databaseValue]) { row in
            (row["name"] as String, row["value"] as String)
        }
        return Dictionary(settings, uniquingKeysWith: { _, last in last })
    }

    /// Sets these settings of `queue` (each replacing its earlier value), in one transaction.
    func saveSettings(_ settings: [String: String], queue: String) async throws(DownloadError) {
        guard !settings.isEmpty else { return }
        let sql = database.upsertSQL(table: "setting", columns: ["queue", "name", "value"], key: ["queue", "name"])
        try await write(settings.map { StoreStatement(sql, [queue.databaseValue, $0.key.databaseValue, $0.value.databaseValue]) })
    }

    /// Removes these settings of `queue`, in one transaction.
    func removeSettings(_ names: [String], queue: String) async throws(DownloadError) {
        guard !names.isEmpty else { return }
        try await write(
            names.map { StoreStatement("DELETE FROM setting WHERE queue = ? AND name = ?", [queue.databaseValue, $0.databaseValue]) })
    }
}
