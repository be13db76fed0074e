package odradek.compat;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;

import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Kafka's Java clients against a cluster: every case prints one line that
 * compat/suites/java_clients.py reads.
 *
 * <pre>
 * VERSION  kafka-clients  3.9.2
 * PLAN     name,name,...                  (before the first case)
 * CASE     name  PASS|FAIL|SKIP|MISSING  seconds  cause   (tab-separated, one line)
 * </pre>
 *
 * Arguments: {@code --bootstrap HOST:PORT,... [--config admin.properties] [--user-config
 * client.properties] [--quick] [--only name,...]}.  With a config (the secured cluster) the
 * SASL_SSL cases run too.  MISSING means the broker lacks an API the case needs (the cause
 * starts with its name).
 */
public final class ClientSuite {
    private ClientSuite() {
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        Properties security = new Properties();
        Properties userSecurity = null;
        boolean quick = false;
        Set<String> only = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[++i];
                case "--config" -> security = load(args[++i]);
                case "--user-config" -> userSecurity = load(args[++i]);
                case "--quick" -> quick = true;
                case "--only" -> only = new HashSet<>(Arrays.asList(args[++i].split(",")));
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstrap == null) {
            throw new IllegalArgumentException("--bootstrap is required");
        }
        Env env = new Env(bootstrap, security, userSecurity);
        List<Case> plan = new ArrayList<>();
        for (List<Case> family : List.of(AdminCases.cases(), AdminDataCases.cases(), ProducerCases.cases(),
                ConsumerCases.cases(), SecurityCases.cases())) {
            for (Case c : family) {
                boolean wanted = only != null ? only.contains(c.name()) : (!quick || c.quick());
                if (wanted && (env.secured || !c.securedOnly())) {
                    plan.add(c);
                }
            }
        }
        System.out.println("VERSION\tkafka-clients\t" + AppInfoParser.getVersion());
        System.out.println("PLAN\t" + plan.stream().map(Case::name).collect(Collectors.joining(",")));
        System.out.flush();
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        for (Case c : plan) {
            long start = System.nanoTime();
            String[] outcome = runOne(pool, c, env);
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("CASE\t%s\t%s\t%.2f\t%s%n", c.name(), outcome[0], seconds, oneLine(outcome[1]));
            System.out.flush();
        }
        env.close();
        // A case that timed out may have left client threads behind.
        System.exit(0);
    }

    /** {status, cause} of one case, run on its own thread so that a hang becomes a failure. */
    private static String[] runOne(ExecutorService pool, Case c, Env env) {
        Future<?> running = pool.submit(() -> {
            c.body().run(env);
            return null;
        });
        try {
            running.get(c.timeoutSeconds(), TimeUnit.SECONDS);
            return new String[] {"PASS", ""};
        } catch (TimeoutException e) {
            running.cancel(true);
            return new String[] {"FAIL", "no answer within " + c.timeoutSeconds() + " s"};
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new String[] {"FAIL", "interrupted"};
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Check.MissingApi missing) {
                return new String[] {"MISSING", missing.api + ": " + missing.getMessage()};
            }
            if (cause instanceof Check.Failure) {
                return new String[] {"FAIL", cause.getMessage()};
            }
            // The whole trace goes to stderr (the suite's jvm.log) for the post-mortem.
            System.err.println("=== " + c.name() + " failed:");
            cause.printStackTrace();
            return new String[] {"FAIL", Check.describe(cause) + at(cause)};
        }
    }

    /** Where an unexpected exception came from: the first frame in this program. */
    private static String at(Throwable t) {
        for (StackTraceElement frame : t.getStackTrace()) {
            if (frame.getClassName().startsWith("odradek.compat.")) {
                return " (at " + frame.getFileName() + ":" + frame.getLineNumber() + ")";
            }
        }
        return "";
    }

    private static String oneLine(String text) {
        return text.replaceAll("[\\t\\r\\n]+", " ");
    }

    private static Properties load(String path) throws IOException {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(path)) {
            props.load(in);
        }
        return props;
    }
}
