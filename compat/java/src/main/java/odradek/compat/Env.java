package odradek.compat;

import static odradek.compat.Check.await;
import static odradek.compat.Check.get;
import static odradek.compat.Check.that;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.Future;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** What a case works with: the cluster's address and logins, clients, and unique names. */
final class Env implements AutoCloseable {
    static final Duration WAIT = Duration.ofSeconds(30);

    final String bootstrap;
    /** The administrator's login (a super-user on the secured cluster); empty on PLAINTEXT. */
    final Properties security;
    /** The unprivileged user's login on the secured cluster, else null. */
    final Properties userSecurity;
    final boolean secured;
    /** Makes this run's topic, group, user and transactional ids unique. */
    final String run = UUID.randomUUID().toString().substring(0, 8);
    private Admin admin;

    Env(String bootstrap, Properties security, Properties userSecurity) {
        this.bootstrap = bootstrap;
        this.security = security;
        this.userSecurity = userSecurity;
        this.secured = !security.isEmpty();
    }

    String name(String stem) {
        return "compat-" + stem + "-" + run;
    }

    /** Connection settings for a client logged in with {@code login}. */
    Properties base(Properties login) {
        Properties props = new Properties();
        props.putAll(login);
        props.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return props;
    }

    /** {@code security} with the SCRAM login of {@code user}. */
    Properties scramLogin(String user, String password) {
        Properties login = new Properties();
        login.putAll(security);
        login.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        return login;
    }

    /** The administrator's admin client, shared by the cases. */
    synchronized Admin admin() {
        if (admin == null) {
            admin = admin(security);
        }
        return admin;
    }

    Admin admin(Properties login) {
        Properties props = base(login);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        return Admin.create(props);
    }

    KafkaProducer<String, String> producer(Object... settings) {
        return producer(security, settings);
    }

    KafkaProducer<String, String> producer(Properties login, Object... settings) {
        Properties props = base(login);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        props.putAll(pairs(settings));
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    KafkaConsumer<String, String> consumer(Object... settings) {
        return consumer(security, settings);
    }

    KafkaConsumer<String, String> consumer(Properties login, Object... settings) {
        Properties props = base(login);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        props.putAll(pairs(settings));
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    private static Map<Object, Object> pairs(Object... settings) {
        Map<Object, Object> map = new HashMap<>();
        for (int i = 0; i < settings.length; i += 2) {
            map.put(settings[i], settings[i + 1]);
        }
        return map;
    }

    /** Creates {@code topic} (replication factor 3) with {@code configs} as key, value, ... and waits for it. */
    TopicDescription createTopic(String topic, int partitions, String... configs) throws Exception {
        Map<String, String> config = new HashMap<>();
        for (int i = 0; i < configs.length; i += 2) {
            config.put(configs[i], configs[i + 1]);
        }
        get(admin().createTopics(List.of(new NewTopic(topic, partitions, (short) 3).configs(config))).all());
        return awaitTopic(topic, partitions);
    }

    /** The topic's description once it has {@code partitions} partitions, each with a leader and a full ISR. */
    TopicDescription awaitTopic(String topic, int partitions) throws Exception {
        return await("topic " + topic, WAIT, () -> describeOrNull(topic), d -> d != null
                && d.partitions().size() == partitions && d.partitions().stream().allMatch(Env::settled));
    }

    private static boolean settled(TopicPartitionInfo p) {
        return p.leader() != null && p.isr().size() == p.replicas().size();
    }

    TopicDescription describeOrNull(String topic) throws Exception {
        try {
            return get(admin().describeTopics(List.of(topic)).allTopicNames()).get(topic);
        } catch (UnknownTopicOrPartitionException e) {
            return null;
        }
    }

    /** Sends {@code count} records {@code prefix + i} to {@code partition} (null: the producer's choice) and waits for each. */
    static List<RecordMetadata> send(KafkaProducer<String, String> producer, String topic, Integer partition,
                                     int count, String prefix) throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sent.add(producer.send(new ProducerRecord<>(topic, partition, "k" + i, prefix + i)));
        }
        List<RecordMetadata> done = new ArrayList<>();
        for (Future<RecordMetadata> f : sent) {
            done.add(f.get());
        }
        return done;
    }

    /** Polls until {@code expected} records arrived (fails on fewer within 30 s, or on more). */
    static List<ConsumerRecord<String, String>> poll(KafkaConsumer<String, String> consumer, int expected)
            throws Exception {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (got.size() < expected && System.nanoTime() < deadline) {
            consumer.poll(Duration.ofMillis(200)).forEach(got::add);
        }
        that(got.size() == expected, "expected %d records, got %d", expected, got.size());
        return got;
    }

    /** Polls for {@code time} and returns what arrived (for checks that nothing more comes). */
    static List<ConsumerRecord<String, String>> pollFor(KafkaConsumer<String, String> consumer, Duration time) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + time.toNanos();
        while (System.nanoTime() < deadline) {
            consumer.poll(Duration.ofMillis(100)).forEach(got::add);
        }
        return got;
    }

    static TopicPartition tp(String topic, int partition) {
        return new TopicPartition(topic, partition);
    }

    @Override
    public synchronized void close() {
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
        }
    }
}
