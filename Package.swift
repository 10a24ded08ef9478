// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Haul",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "Haul", targets: ["Haul"]),
        .executable(name: "haul", targets: ["HaulCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // Only HaulTestSupport: NIOResumableUpload is Apple's server side of the IETF draft
        // "Resumable Uploads for HTTP", the test server `haul put --protocol ietf` talks to.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // The store on a PostgreSQL server (`haul daemon --store postgresql://…`) for a queue
        // that outlives one machine; SQLite stays the default.
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // The daemon's `/metrics` (Prometheus' text format; swift-prometheus is a swift-metrics
        // backend, and 2.13 is the floor here); the library itself stays free of both.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // `swift package generate-documentation --target Haul` builds the DocC catalog (CI does).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .target(
            name: "Haul",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                "CHaulSystem",
            ]
        ),
        .target(name: "CHaulSystem"),
        .target(
            name: "HaulDaemon",
            dependencies: [
                "Haul",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            plugins: [.plugin(name: "EmbedWebAssets")]
        ),
        // Compiles Sources/HaulDaemon/WebAssets into the daemon: the binary needs no resource bundle.
        .executableTarget(name: "WebAssetEmbedder"),
        .plugin(name: "EmbedWebAssets", capability: .buildTool(), dependencies: ["WebAssetEmbedder"]),
        .executableTarget(
            name: "HaulCLI",
            dependencies: [
                "Haul",
                "HaulDaemon",
                "CHaulSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Sources/haul",
            linkerSettings: [
                // The static standard library's link exports every symbol of the executable's own
                // modules (52,000): the runtime's start-up `dladdr` then scans them all, and the
                // loader reads their table. Nothing looks a symbol of the executable up by name.
                .unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux], configuration: .release))
            ]
        ),
        // The README's and the DocC articles' code, compiled (and checked against them by
        // DocumentationExamplesTests): a renamed API breaks the build, not the reader.
        .executableTarget(name: "HaulExamples", dependencies: ["Haul"], path: "Examples"),
        .target(
            name: "HaulTestSupport",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "HaulTestSupportTests",
            dependencies: ["HaulTestSupport"]
        ),
        .testTarget(
            name: "HaulTests",
            dependencies: [
                "Haul",
                "HaulCLI",
                "HaulDaemon",
                "HaulTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            // Read by path (#filePath), like Tests/Interop.
            exclude: ["Fixtures"]
        ),
    ]
)
