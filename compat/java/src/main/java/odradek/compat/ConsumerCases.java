package odradek.compat;

import static odradek.compat.Check.await;
import static odradek.compat.Check.equal;
import static odradek.compat.Check.fails;
import static odradek.compat.Check.get;
import static odradek.compat.Check.that;
import static odradek.compat.Env.WAIT;
import static odradek.compat.Env.tp;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;

/** Consumers: read_committed, the cooperative-sticky assignor, static membership, seek and offsetsForTimes. */
final class ConsumerCases {
    private ConsumerCases() {
    }

    static List<Case> cases() {
        return List.of(
                Case.quick("consumer.read_committed", ConsumerCases::readCommitted),
                Case.quick("consumer.cooperative_sticky", ConsumerCases::cooperativeSticky),
                Case.quick("consumer.static_membership", ConsumerCases::staticMembership),
                Case.quick("consumer.seek_and_offsets_for_times", ConsumerCases::seekAndOffsetsForTimes),
                Case.full("consumer.commit_and_resume", ConsumerCases::commitAndResume));
    }

    /** An open transaction holds read_committed readers at its first offset (the last stable offset). */
    static void readCommitted(Env env) throws Exception {
        String topic = env.name("read-committed");
        env.createTopic(topic, 1);
        TopicPartition p = tp(topic, 0);
        try (KafkaProducer<String, String> txn = env.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                env.name("txn-lso"));
             KafkaProducer<String, String> plain = env.producer();
             KafkaConsumer<String, String> committed = env.consumer(ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                     "read_committed");
             KafkaConsumer<String, String> uncommitted = env.consumer()) {
            txn.initTransactions();
            txn.beginTransaction();
            Env.send(txn, topic, 0, 5, "first");
            txn.commitTransaction();          // offsets 0-4, the marker at 5
            txn.beginTransaction();
            Env.send(txn, topic, 0, 5, "open"); // 6-10, still open
            Env.send(plain, topic, 0, 5, "plain"); // 11-15
            equal(6L, get(env.admin().listOffsets(Map.of(p, OffsetSpec.latest()),
                    new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(p)).offset(),
                    "the last stable offset");
            equal(16L, AdminDataCases.offset(env, p, OffsetSpec.latest()).offset(), "the high watermark");
            equal(6L, committed.endOffsets(List.of(p)).get(p), "endOffsets read_committed");
            committed.assign(List.of(p));
            uncommitted.assign(List.of(p));
            List<String> first = new ArrayList<>();
            Env.poll(committed, 5).forEach(r -> first.add(r.value()));
            equal(List.of("first0", "first1", "first2", "first3", "first4"), first, "read_committed before the commit");
            that(Env.pollFor(committed, Duration.ofSeconds(1)).isEmpty(), "read_committed read past the open transaction");
            equal(15, Env.poll(uncommitted, 15).size(), "records read uncommitted");
            txn.commitTransaction();
            List<String> rest = new ArrayList<>();
            Env.poll(committed, 10).forEach(r -> rest.add(r.value()));
            equal(List.of("open0", "open1", "open2", "open3", "open4", "plain0", "plain1", "plain2", "plain3",
                    "plain4"), rest, "read_committed after the commit");
        }
    }

    /** Records what a consumer's rebalance listener was told. */
    static final class Recorder implements ConsumerRebalanceListener {
        final Set<TopicPartition> revoked = new HashSet<>();
        final Set<TopicPartition> lost = new HashSet<>();
        int largestRevocation;

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revoked.addAll(partitions);
            largestRevocation = Math.max(largestRevocation, partitions.size());
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            lost.addAll(partitions);
        }
    }

    /** A second member takes half the partitions; the first gives up only those (incremental, KIP-429). */
    static void cooperativeSticky(Env env) throws Exception {
        String topic = env.name("cooperative");
        String group = env.name("cooperative-group");
        env.createTopic(topic, 6);
        Object[] settings = {ConsumerConfig.GROUP_ID_CONFIG, group,
            ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName()};
        Recorder first = new Recorder();
        Recorder second = new Recorder();
        try (KafkaConsumer<String, String> c1 = env.consumer(settings);
             KafkaConsumer<String, String> c2 = env.consumer(settings)) {
            c1.subscribe(List.of(topic), first);
            pollUntil(() -> c1.assignment().size() == 6, "the first member's 6 partitions", c1);
            int generation = c1.groupMetadata().generationId();
            c2.subscribe(List.of(topic), second);
            pollUntil(() -> c1.assignment().size() == 3 && c2.assignment().size() == 3, "3 partitions each", c1, c2);
            Set<TopicPartition> union = new HashSet<>(c1.assignment());
            union.addAll(c2.assignment());
            equal(6, union.size(), "partitions assigned");
            equal(c2.assignment(), first.revoked, "partitions the first member gave up");
            equal(3, first.largestRevocation, "the largest revocation");
            that(first.lost.isEmpty() && second.lost.isEmpty(), "lost partitions %s %s", first.lost, second.lost);
            that(c1.groupMetadata().generationId() >= generation + 2, "generation %d then %d: not two rebalances",
                    generation, c1.groupMetadata().generationId());
            ConsumerGroupDescription d = AdminDataCases.describeGroup(env, group);
            equal("cooperative-sticky", d.partitionAssignor(), "the group's protocol");
            equal(2, d.members().size(), "members");
        }
    }

    /** A static member restarts without a rebalance; a second one with its id fences it; removeMembers removes it. */
    static void staticMembership(Env env) throws Exception {
        String topic = env.name("static");
        String group = env.name("static-group");
        String instance = "instance-" + env.run;
        env.createTopic(topic, 2);
        Object[] settings = {ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance,
            ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 30_000};
        int generation;
        String firstMemberId;
        try (KafkaConsumer<String, String> c = env.consumer(settings)) {
            c.subscribe(List.of(topic));
            pollUntil(() -> c.assignment().size() == 2, "the static member's assignment", c);
            generation = c.groupMetadata().generationId();
            firstMemberId = c.groupMetadata().memberId();
        }
        // A static member leaves no LeaveGroup behind: it is still the group's member.
        MemberDescription member = onlyMember(env, group);
        equal(Optional.of(instance), member.groupInstanceId(), "the member's group.instance.id");
        try (KafkaConsumer<String, String> c = env.consumer(settings)) {
            c.subscribe(List.of(topic));
            pollUntil(() -> c.assignment().size() == 2, "the restarted member's assignment", c);
            equal(generation, c.groupMetadata().generationId(), "the generation after a static rejoin");
            that(!c.groupMetadata().memberId().equals(firstMemberId), "the same member id %s", firstMemberId);
            try (KafkaConsumer<String, String> rival = env.consumer(settings)) {
                rival.subscribe(List.of(topic));
                pollUntil(() -> rival.assignment().size() == 2, "the rival's assignment", rival);
                fails("the replaced member's poll", () -> {
                    long deadline = System.nanoTime() + WAIT.toNanos();
                    while (System.nanoTime() < deadline) {
                        c.poll(Duration.ofMillis(200));
                        c.commitSync(Map.of(tp(topic, 0), new OffsetAndMetadata(0)));
                    }
                }, FencedInstanceIdException.class);
            }
        }
        get(env.admin().removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(
                List.of(new MemberToRemove(instance)))).all());
        ConsumerGroupDescription d = AdminDataCases.describeGroup(env, group);
        equal(ConsumerGroupState.EMPTY, d.state(), "state after removeMembersFromConsumerGroup");
        equal(0, d.members().size(), "members after removeMembersFromConsumerGroup");
    }

    static void seekAndOffsetsForTimes(Env env) throws Exception {
        String topic = env.name("seek");
        env.createTopic(topic, 1);
        TopicPartition p = tp(topic, 0);
        long base = System.currentTimeMillis() - 600_000;
        try (KafkaProducer<String, String> producer = env.producer(ProducerConfig.LINGER_MS_CONFIG, 20)) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, base + i * 1000L, "k", "v" + i));
            }
            producer.flush();
        }
        try (KafkaConsumer<String, String> consumer = env.consumer(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none")) {
            consumer.assign(List.of(p));
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(Map.of(p, base + 5500));
            equal(6L, found.get(p).offset(), "offsetsForTimes(base+5.5 s)");
            equal(base + 6000, found.get(p).timestamp(), "its timestamp");
            equal(null, consumer.offsetsForTimes(Map.of(p, base + 99_000)).get(p), "offsetsForTimes after the last");
            equal(0L, consumer.beginningOffsets(List.of(p)).get(p), "beginningOffsets");
            equal(10L, consumer.endOffsets(List.of(p)).get(p), "endOffsets");
            consumer.seek(p, found.get(p).offset());
            equal("v6", Env.poll(consumer, 4).get(0).value(), "the record after seek(6)");
            consumer.seek(p, 3);
            equal("v3", Env.poll(consumer, 7).get(0).value(), "the record after seek(3)");
            consumer.seekToEnd(List.of(p));
            equal(10L, consumer.position(p), "position after seekToEnd");
            consumer.seekToBeginning(List.of(p));
            equal(0L, consumer.position(p), "position after seekToBeginning");
            ConsumerRecord<String, String> first = Env.poll(consumer, 10).get(0);
            that(first.leaderEpoch().isPresent(), "no leader epoch on %s", first);
            consumer.seek(p, new OffsetAndMetadata(2, first.leaderEpoch(), ""));
            equal("v2", Env.poll(consumer, 8).get(0).value(), "the record after a seek with a leader epoch");
            consumer.seek(p, 50);
            fails("a position past the end with auto.offset.reset=none", () -> {
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (System.nanoTime() < deadline) {
                    consumer.poll(Duration.ofMillis(200));
                }
            }, OffsetOutOfRangeException.class);
        }
    }

    static void commitAndResume(Env env) throws Exception {
        String topic = env.name("resume");
        String group = env.name("resume-group");
        env.createTopic(topic, 1);
        TopicPartition p = tp(topic, 0);
        try (KafkaProducer<String, String> producer = env.producer()) {
            Env.send(producer, topic, 0, 10, "v");
        }
        try (KafkaConsumer<String, String> c = env.consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
            c.subscribe(List.of(topic));
            Env.poll(c, 10);
            c.commitSync(Map.of(p, new OffsetAndMetadata(5, "halfway")));
            AtomicReference<Object> callback = new AtomicReference<>();
            c.commitAsync(Map.of(p, new OffsetAndMetadata(6)), (offsets, e) -> callback.set(e == null ? offsets : e));
            await("the commitAsync callback", WAIT, () -> {
                c.poll(Duration.ofMillis(100));
                return callback.get();
            }, v -> v != null);
            that(callback.get() instanceof Map, "commitAsync failed: %s", callback.get());
            c.commitSync(Map.of(p, new OffsetAndMetadata(5, "halfway")));
        }
        try (KafkaConsumer<String, String> c = env.consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
            c.subscribe(List.of(topic));
            equal("v5", Env.poll(c, 5).get(0).value(), "the first record after resuming");
            OffsetAndMetadata committed = c.committed(Set.of(p)).get(p);
            equal(5L, committed.offset(), "committed offset");
            equal("halfway", committed.metadata(), "committed metadata");
        }
    }

    // ------------------------------------------------------------------ helpers

    @FunctionalInterface
    interface Condition {
        boolean holds();
    }

    /** Polls every consumer in turn until {@code condition} holds (rebalances progress only while members poll). */
    @SafeVarargs
    static void pollUntil(Condition condition, String what, KafkaConsumer<String, String>... consumers) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!condition.holds()) {
            that(System.nanoTime() < deadline, "no %s within %d s", what, WAIT.toSeconds());
            for (KafkaConsumer<String, String> c : consumers) {
                c.poll(Duration.ofMillis(100));
            }
        }
    }

    static MemberDescription onlyMember(Env env, String group) throws Exception {
        ConsumerGroupDescription d = AdminDataCases.describeGroup(env, group);
        equal(1, d.members().size(), "members of " + group + " (" + d.state() + ")");
        return d.members().iterator().next();
    }
}
