package engram.neo4j;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.time.Duration;
import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.io.ByteUnit;
import org.neo4j.logging.Level;
import org.neo4j.logging.log4j.Log4jLogProvider;

/**
 * A Neo4j 5 Community DBMS for Engram's tests and local runs: Bolt on 127.0.0.1 only, no auth.
 *
 * <p>Usage: {@code EngramNeo4j PORT DATA_DIR}. Prints {@code READY bolt://127.0.0.1:PORT} once the
 * default database accepts work, then serves until SIGTERM/SIGINT, which shuts the DBMS down cleanly
 * (a shutdown hook). Started and stopped by {@code devstack/neo4j_server.py}.
 */
public final class EngramNeo4j {
    private static final String HOST = "127.0.0.1";
    private static final long PAGE_CACHE_MIB = 256;

    private EngramNeo4j() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: EngramNeo4j PORT DATA_DIR");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);
        Path home = Path.of(args[1]).toAbsolutePath();

        DatabaseManagementService dbms;
        try {
            dbms = new DatabaseManagementServiceBuilder(home)
                    // warnings and errors of the user log go to stdout (the caller's log file)
                    .setUserLogProvider(new Log4jLogProvider(System.out, Level.WARN))
                    .setConfig(BoltConnector.enabled, true)
                    .setConfig(BoltConnector.listen_address, new SocketAddress(HOST, port))
                    .setConfig(BoltConnector.advertised_address, new SocketAddress(HOST, port))
                    .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                    // loopback only, so no users and passwords
                    .setConfig(GraphDatabaseSettings.auth_enabled, false)
                    // no usage report sent anywhere
                    .setConfig(GraphDatabaseSettings.udc_enabled, false)
                    // a modest footprint: the machine is shared with PostgreSQL, Redis and the tests
                    .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(PAGE_CACHE_MIB))
                    .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                    .setConfig(GraphDatabaseSettings.logical_log_rotation_threshold, ByteUnit.mebiBytes(64))
                    .setConfig(GraphDatabaseSettings.keep_logical_logs, "false")
                    // stop in about a second instead of the Bolt server's default quiet periods (~10 s)
                    .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0)
                    .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_timeout, Duration.ofSeconds(2))
                    .build();
        } catch (RuntimeException e) {
            System.out.println("FAILED " + e);
            e.printStackTrace(System.out);
            System.out.flush();
            System.exit(1);
            return;
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("STOPPING");
            System.out.flush();
            dbms.shutdown();
            System.out.println("STOPPED");
            System.out.flush();
        }, "engram-neo4j-shutdown"));

        GraphDatabaseService db = dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
        if (!db.isAvailable(TimeUnit.MINUTES.toMillis(2))) {
            System.out.println("FAILED database " + db.databaseName() + " did not become available");
            System.out.flush();
            System.exit(1);
        }
        db.executeTransactionally("RETURN 1");
        System.out.println("READY bolt://" + HOST + ":" + port);
        System.out.flush();
        // serve until the JVM is asked to stop (the shutdown hook closes the DBMS)
        Thread.currentThread().join();
    }
}
