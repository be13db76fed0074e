package odradek.compat;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.UnsupportedVersionException;

/** The program's own small assertion helper: each failure carries a one-line cause. */
final class Check {
    private Check() {
    }

    /** A case's check did not hold. */
    static final class Failure extends AssertionError {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }
    }

    /** The broker does not offer an API the case needs (the caller got UnsupportedVersionException). */
    static final class MissingApi extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final String api;

        MissingApi(String api, String evidence) {
            super(evidence);
            this.api = api;
        }
    }

    @FunctionalInterface
    interface Action {
        void run() throws Exception;
    }

    @FunctionalInterface
    interface Call<T> {
        T call() throws Exception;
    }

    static void that(boolean condition, String format, Object... args) {
        if (!condition) {
            throw new Failure(String.format(format, args));
        }
    }

    static void equal(Object expected, Object actual, String what) {
        if (!Objects.equals(expected, actual)) {
            throw new Failure(what + ": expected " + expected + ", got " + actual);
        }
    }

    /** The result of an admin call, waited for at most 30 s; a failed future throws its cause. */
    static <T> T get(KafkaFuture<T> future) throws Exception {
        try {
            return future.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
    }

    /**
     * Runs {@code action}, which must fail with one of {@code accepted} (anywhere in the cause
     * chain); returns that throwable.
     */
    @SafeVarargs
    @SuppressWarnings("varargs") // the array only leaves as an Object[] for its names
    static Throwable fails(String what, Action action, Class<? extends Throwable>... accepted) {
        try {
            action.run();
        } catch (Throwable thrown) {
            for (Throwable t = thrown; t != null; t = t.getCause()) {
                for (Class<? extends Throwable> type : accepted) {
                    if (type.isInstance(t)) {
                        return t;
                    }
                }
            }
            throw new Failure(what + ": expected " + names(accepted) + ", got " + describe(thrown));
        }
        throw new Failure(what + ": expected " + names(accepted) + ", but it succeeded");
    }

    /**
     * Runs {@code call}, which needs the broker's {@code api}: an UnsupportedVersionException
     * becomes MissingApi naming it, anything else passes through.
     */
    static <T> T needs(String api, Call<T> call) throws Exception {
        try {
            return call.call();
        } catch (Exception thrown) {
            for (Throwable t = thrown; t != null; t = t.getCause()) {
                if (t instanceof UnsupportedVersionException) {
                    throw new MissingApi(api, describe(t));
                }
            }
            throw thrown;
        }
    }

    /** Polls {@code probe} every 100 ms until {@code done} accepts its value; fails after {@code timeout}. */
    static <T> T await(String what, Duration timeout, Call<T> probe, Predicate<T> done) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        T last = probe.call();
        while (!done.test(last)) {
            if (System.nanoTime() > deadline) {
                throw new Failure(what + ": still " + last + " after " + timeout.toSeconds() + " s");
            }
            Thread.sleep(100);
            last = probe.call();
        }
        return last;
    }

    static String describe(Throwable t) {
        String message = t.getMessage();
        return t.getClass().getSimpleName() + (message == null ? "" : ": " + message);
    }

    private static String names(Class<?>[] types) {
        StringBuilder joined = new StringBuilder();
        for (Class<?> type : types) {
            joined.append(joined.length() == 0 ? "" : " or ").append(type.getSimpleName());
        }
        return joined.toString();
    }
}
