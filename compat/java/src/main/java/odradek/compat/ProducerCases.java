package odradek.compat;

import static odradek.compat.Check.await;
import static odradek.compat.Check.equal;
import static odradek.compat.Check.fails;
import static odradek.compat.Check.get;
import static odradek.compat.Check.that;
import static odradek.compat.Env.tp;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/** Idempotent and transactional producers, KIP-447's sendOffsetsToTransaction, compression, big records. */
final class ProducerCases {
    private ProducerCases() {
    }

    static List<Case> cases() {
        return List.of(
                Case.quick("producer.idempotent", ProducerCases::idempotent),
                Case.quick("producer.transactions", ProducerCases::transactions),
                Case.full("producer.transactional_fencing", ProducerCases::fencing),
                Case.quick("producer.send_offsets_to_transaction", ProducerCases::sendOffsetsToTransaction),
                Case.full("producer.txn_offsets_fenced_member", ProducerCases::txnOffsetsFencedMember),
                Case.full("producer.compression", ProducerCases::compression),
                Case.full("producer.headers_and_large_record", ProducerCases::headersAndLargeRecord));
    }

    static void idempotent(Env env) throws Exception {
        String topic = env.name("idempotent");
        env.createTopic(topic, 3, "min.insync.replicas", "2");
        int perPartition = 1000;
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5, ProducerConfig.LINGER_MS_CONFIG, 5,
                ProducerConfig.BATCH_SIZE_CONFIG, 4096)) {
            for (int i = 0; i < 3 * perPartition; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, i % 3, "k", Integer.toString(i / 3))));
            }
            for (int i = 0; i < sent.size(); i++) {
                equal((long) (i / 3), sent.get(i).get().offset(), "offset of record " + i);
            }
        }
        Map<Integer, List<String>> byPartition = new HashMap<>();
        try (KafkaConsumer<String, String> consumer = env.consumer()) {
            consumer.assign(List.of(tp(topic, 0), tp(topic, 1), tp(topic, 2)));
            for (ConsumerRecord<String, String> r : Env.poll(consumer, 3 * perPartition)) {
                byPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
            }
        }
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < perPartition; i++) {
            expected.add(Integer.toString(i));
        }
        for (int p = 0; p < 3; p++) {
            equal(expected, byPartition.get(p), "partition " + p + "'s records");
            TopicPartition partition = tp(topic, p);
            var states = get(env.admin().describeProducers(List.of(partition)).partitionResult(partition))
                    .activeProducers();
            equal(1, states.size(), "producers of " + partition);
            equal(perPartition - 1, states.get(0).lastSequence(), "the last sequence on " + partition);
        }
    }

    static void transactions(Env env) throws Exception {
        String topic = env.name("transactions");
        env.createTopic(topic, 2);
        try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                env.name("txn-visibility"))) {
            producer.initTransactions();
            for (String outcome : List.of("commit1-", "abort-", "commit2-")) {
                producer.beginTransaction();
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, i % 2, "k", outcome + i));
                }
                if (outcome.startsWith("abort")) {
                    producer.flush(); // abortTransaction drops what was not sent yet
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
        List<String> committed = values(env, topic, 2, "read_committed", 20);
        that(committed.stream().allMatch(v -> v.startsWith("commit")), "read_committed read %s", committed);
        equal(30, values(env, topic, 2, "read_uncommitted", 30).size(), "records read uncommitted");
    }

    static void fencing(Env env) throws Exception {
        String topic = env.name("fencing");
        String txnId = env.name("txn-fencing");
        env.createTopic(topic, 1);
        try (KafkaProducer<String, String> first = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
             KafkaProducer<String, String> second = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId)) {
            first.initTransactions();
            first.beginTransaction();
            Env.send(first, topic, 0, 2, "zombie");
            second.initTransactions();
            fails("the fenced producer's commit", first::commitTransaction, ProducerFencedException.class,
                    InvalidProducerEpochException.class);
            second.beginTransaction();
            Env.send(second, topic, 0, 2, "winner");
            second.commitTransaction();
        }
        equal(List.of("winner0", "winner1"), values(env, topic, 1, "read_committed", 2), "committed records");
    }

    static void sendOffsetsToTransaction(Env env) throws Exception {
        String input = env.name("eos-in");
        String output = env.name("eos-out");
        String group = env.name("eos-group");
        env.createTopic(input, 2);
        env.createTopic(output, 1);
        try (KafkaProducer<String, String> producer = env.producer()) {
            Env.send(producer, input, 0, 10, "a");
            Env.send(producer, input, 1, 10, "b");
        }
        try (KafkaConsumer<String, String> consumer = env.consumer(ConsumerConfig.GROUP_ID_CONFIG, group,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
             KafkaProducer<String, String> producer = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                     env.name("txn-eos"))) {
            consumer.subscribe(List.of(input));
            List<ConsumerRecord<String, String>> records = Env.poll(consumer, 20);
            Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
            for (TopicPartition p : consumer.assignment()) {
                positions.put(p, new OffsetAndMetadata(consumer.position(p)));
            }
            producer.initTransactions();
            for (boolean commit : new boolean[] {false, true}) {
                producer.beginTransaction();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value().toUpperCase()));
                }
                producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                    equal(Arrays.asList(null, null), committedByConsumer(consumer, input),
                            "offsets after the aborted transaction");
                }
            }
            equal(List.of(10L, 10L), committedByConsumer(consumer, input), "offsets after the committed transaction");
            // The AdminClient skips a partition answered UNSTABLE_OFFSET_COMMIT: it sees them once the marker is in.
            await("the admin's view of the offsets", Env.WAIT, () -> AdminDataCases.committed(env, group),
                    Map.of(tp(input, 0), 10L, tp(input, 1), 10L)::equals);
        }
        List<String> out = values(env, output, 1, "read_committed", 20);
        equal(20, new HashSet<>(out).size(), "distinct output records");
    }

    /**
     * The group's offsets of both partitions of {@code input} as its member sees them (null: none):
     * a read_committed consumer asks with require_stable and waits out UNSTABLE_OFFSET_COMMIT
     * while a transaction's offsets await their marker (KIP-447).
     */
    static List<Long> committedByConsumer(KafkaConsumer<String, String> consumer, String input) {
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.of(tp(input, 0), tp(input, 1)));
        List<Long> offsets = new ArrayList<>();
        for (int p = 0; p < 2; p++) {
            OffsetAndMetadata o = committed.get(tp(input, p));
            offsets.add(o == null ? null : o.offset());
        }
        return offsets;
    }

    /** KIP-447: offsets sent with the group metadata of a member that left the group are refused. */
    static void txnOffsetsFencedMember(Env env) throws Exception {
        String input = env.name("fenced-in");
        String group = env.name("fenced-group");
        env.createTopic(input, 1);
        try (KafkaProducer<String, String> producer = env.producer()) {
            Env.send(producer, input, 0, 3, "x");
        }
        ConsumerGroupMetadata stale;
        try (KafkaConsumer<String, String> consumer = env.consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
            consumer.subscribe(List.of(input));
            Env.poll(consumer, 3);
            stale = consumer.groupMetadata();
        }
        that(stale.generationId() > 0 && !stale.memberId().isEmpty(), "group metadata %s", stale);
        try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                env.name("txn-stale"))) {
            producer.initTransactions();
            producer.beginTransaction();
            fails("offsets of a member that left", () -> {
                producer.sendOffsetsToTransaction(Map.of(tp(input, 0), new OffsetAndMetadata(3)), stale);
                producer.commitTransaction();
            }, CommitFailedException.class);
            producer.abortTransaction();
        }
        equal(Map.of(), AdminDataCases.committed(env, group, tp(input, 0)), "committed offsets");
    }

    static void compression(Env env) throws Exception {
        String topic = env.name("compression");
        env.createTopic(topic, 1);
        Set<String> expected = new HashSet<>();
        for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                    ProducerConfig.LINGER_MS_CONFIG, 20)) {
                Env.send(producer, topic, 0, 50, codec + "-");
            }
            for (int i = 0; i < 50; i++) {
                expected.add(codec + "-" + i);
            }
        }
        equal(expected, new HashSet<>(values(env, topic, 1, "read_uncommitted", 250)), "values read back");
    }

    static void headersAndLargeRecord(Env env) throws Exception {
        String topic = env.name("large");
        env.createTopic(topic, 1);
        StringBuilder big = new StringBuilder();
        Random random = new Random(7);
        while (big.length() < 900_000) {
            big.append(Long.toString(random.nextLong(), 36));
        }
        List<Header> headers = List.of(new RecordHeader("trace", "abc".getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("empty", null));
        try (KafkaProducer<String, String> producer = env.producer()) {
            producer.send(new ProducerRecord<>(topic, 0, "big", big.toString(), headers)).get();
        }
        try (KafkaConsumer<String, String> consumer = env.consumer()) {
            consumer.assign(List.of(tp(topic, 0)));
            ConsumerRecord<String, String> r = Env.poll(consumer, 1).get(0);
            equal(big.toString(), r.value(), "the 900 KB value");
            equal(headers, List.of(r.headers().toArray()), "headers");
        }
    }

    /** The values of every record of {@code topic}, read from the start with {@code isolation}. */
    static List<String> values(Env env, String topic, int partitions, String isolation, int expected) throws Exception {
        List<TopicPartition> all = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            all.add(tp(topic, p));
        }
        try (KafkaConsumer<String, String> consumer = env.consumer(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation)) {
            consumer.assign(all);
            List<String> values = new ArrayList<>();
            Env.poll(consumer, expected).forEach(r -> values.add(r.value()));
            that(Env.pollFor(consumer, java.time.Duration.ofMillis(500)).isEmpty(), "more than %d records", expected);
            return values;
        }
    }
}
