package odradek.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Collectors;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Kafka Streams' word count with exactly-once (compat/suites/streams.py), in two modes.
 *
 * <pre>
 * app   --bootstrap B --application-id A --input I --output O --state-dir D
 *       One Streams instance (one thread) until it is signalled; prints STATE name on every
 *       state change and ERROR cause when a stream thread dies (it is replaced).
 * check --bootstrap B --output O --expect N --timeout S
 *       Reads O with read_committed from its start until N records arrived and the positions
 *       reached the end offsets (then a second more), or S seconds passed; prints
 *       COUNTS word ranges   (the word's counts in output order: "1-40" or "1-17,16-40")
 *       WAITED what seconds  (a metadata answer that took more than 5 s)
 *       END records caught-up|timed-out positions
 * </pre>
 *
 * The topology splits lines into words, groups them by word (a repartition topic), counts
 * them in the state store "counts" (its changelog topic) and writes every new count to O.
 * The store has no cache, so each word read yields exactly one output record: under
 * exactly-once the counts of a word in O are 1, 2, ..., n with no repeat and no gap.
 */
public final class WordCount {
    static final String STORE = "counts";
    static final String REPARTITION = "words";

    private WordCount() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            options.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        System.out.println("VERSION\tkafka-streams\t" + AppInfoParser.getVersion());
        switch (args.length > 0 ? args[0] : "") {
            case "app" -> app(options);
            case "check" -> check(options);
            default -> throw new IllegalArgumentException("usage: WordCount app|check --option value ...");
        }
    }

    private static String option(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    private static void app(Map<String, String> options) throws InterruptedException {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(option(options, "input"), Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with(REPARTITION, Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE))
                .toStream()
                .to(option(options, "output"), Produced.with(Serdes.String(), Serdes.Long()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, option(options, "application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, option(options, "bootstrap"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, option(options, "state-dir"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // No record cache: every count goes downstream (the check relies on it).
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // A killed instance's tasks move to the other after 10 s, not Streams' default 45 s.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10_000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1_000);
        // replication.factor stays Streams' default (-1: the broker's default.replication.factor).

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE\t" + now);
            System.out.flush();
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("ERROR\t" + Check.describe(e).replaceAll("[\\t\\r\\n]+", " "));
            System.out.flush();
            e.printStackTrace();
            return StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(30))));
        streams.start();
        stopped.await();
    }

    private static void check(Map<String, String> options) {
        String output = option(options, "output");
        long expected = Long.parseLong(option(options, "expect"));
        long deadline = System.nanoTime() + Duration.ofSeconds(Long.parseLong(option(options, "timeout"))).toNanos();
        Properties props = new Properties();
        props.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, option(options, "bootstrap"));
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        Map<String, List<Long>> counts = new TreeMap<>();
        long records = 0;
        boolean caughtUp = false;
        String positions;
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(props, new StringDeserializer(),
                new LongDeserializer())) {
            List<TopicPartition> partitions = partitions(consumer, output, deadline);
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
                    counts.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                    records++;
                }
                if (records >= expected && atEnd(consumer, partitions)) {
                    caughtUp = true;
                    break;
                }
            }
            if (caughtUp) { // what comes after the expected records is a duplicate
                long more = System.nanoTime() + Duration.ofSeconds(1).toNanos();
                while (System.nanoTime() < more) {
                    for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
                        counts.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                        records++;
                    }
                }
            }
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, Duration.ofSeconds(30));
            positions = partitions.stream().map(tp -> tp.partition() + ":" + consumer.position(tp) + "/" + ends.get(tp))
                    .collect(Collectors.joining(","));
        }
        for (Map.Entry<String, List<Long>> word : counts.entrySet()) {
            System.out.println("COUNTS\t" + word.getKey() + "\t" + ranges(word.getValue()));
        }
        System.out.println("END\t" + records + "\t" + (caughtUp ? "caught-up" : "timed-out") + "\t" + positions);
    }

    /**
     * The output's partitions.  A metadata request left unanswered for request.timeout.ms is
     * asked again until the deadline; each retry prints a WAITED line (how long it took).
     */
    private static List<TopicPartition> partitions(KafkaConsumer<String, Long> consumer, String topic,
                                                   long deadline) {
        long start = System.nanoTime();
        while (true) {
            try {
                List<TopicPartition> found = consumer.partitionsFor(topic, Duration.ofSeconds(30)).stream()
                        .map(p -> new TopicPartition(p.topic(), p.partition())).collect(Collectors.toList());
                if (System.nanoTime() - start > Duration.ofSeconds(5).toNanos()) {
                    System.out.printf("WAITED\tmetadata of %s\t%.1f%n", topic, (System.nanoTime() - start) / 1e9);
                }
                return found;
            } catch (TimeoutException e) {
                System.out.printf("WAITED\tmetadata of %s (timed out)\t%.1f%n", topic, (System.nanoTime() - start) / 1e9);
                if (System.nanoTime() > deadline) {
                    throw e;
                }
            }
        }
    }

    /** Whether every position reached its partition's end (the last stable offset, read_committed). */
    private static boolean atEnd(KafkaConsumer<String, Long> consumer, List<TopicPartition> partitions) {
        Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, Duration.ofSeconds(30));
        return partitions.stream().allMatch(tp -> consumer.position(tp) >= ends.get(tp));
    }

    /** "1-17,16-40" for 1..17 then 16..40: runs of consecutive values. */
    static String ranges(List<Long> values) {
        StringBuilder out = new StringBuilder();
        int i = 0;
        while (i < values.size()) {
            int j = i;
            while (j + 1 < values.size() && values.get(j + 1) == values.get(j) + 1) {
                j++;
            }
            out.append(out.length() == 0 ? "" : ",").append(values.get(i));
            if (j > i) {
                out.append('-').append(values.get(j));
            }
            i = j + 1;
        }
        return out.toString();
    }
}
