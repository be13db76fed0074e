package odradek.compat;

import static odradek.compat.Check.await;
import static odradek.compat.Check.equal;
import static odradek.compat.Check.fails;
import static odradek.compat.Check.get;
import static odradek.compat.Env.WAIT;

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourceType;

/** SCRAM-SHA-512 over SASL_SSL and the ACL authorizer (the secured cluster only). */
final class SecurityCases {
    private SecurityCases() {
    }

    static List<Case> cases() {
        return List.of(
                Case.secured("security.scram_sha512_new_user", SecurityCases::scramNewUser),
                Case.secured("security.acls_enforced", SecurityCases::aclsEnforced));
    }

    /** A user created through AlterUserScramCredentials logs in with SCRAM-SHA-512, within its ACLs. */
    static void scramNewUser(Env env) throws Exception {
        String user = "carol-" + env.run;
        String topic = env.name("carol");
        String group = env.name("carol-group");
        env.createTopic(topic, 1);
        get(env.admin().alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "carol-secret"))).all());
        String principal = "User:" + user;
        List<AclBinding> acls = new ArrayList<>();
        for (AclOperation op : List.of(AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)) {
            acls.add(AdminCases.binding(ResourceType.TOPIC, topic, PatternType.LITERAL, principal, "*", op,
                    AclPermissionType.ALLOW));
        }
        acls.add(AdminCases.binding(ResourceType.GROUP, group, PatternType.LITERAL, principal, "*", AclOperation.READ,
                AclPermissionType.ALLOW));
        // An idempotent producer's InitProducerId wants IdempotentWrite on the cluster on Kafka 2.8
        // (Kafka 3.0 settles for Write on any topic).
        acls.add(AdminCases.binding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, principal, "*",
                AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW));
        get(env.admin().createAcls(acls).all());
        Properties login = env.scramLogin(user, "carol-secret");
        // Credentials and ACLs reach every broker through ZooKeeper's change notifications.
        await("carol's first write", WAIT, () -> trySend(env, login, topic, true), error -> error == null);
        try (KafkaConsumer<String, String> consumer = env.consumer(login, ConsumerConfig.GROUP_ID_CONFIG, group)) {
            consumer.subscribe(List.of(topic));
            equal("probe0", Env.poll(consumer, 1).get(0).value(), "what carol reads");
            consumer.commitSync();
        }
        try (Admin wrong = env.admin(env.scramLogin(user, "not-the-password"))) {
            fails("a wrong password", () -> get(wrong.describeCluster().nodes()), SaslAuthenticationException.class);
        }
        try (KafkaConsumer<String, String> consumer = env.consumer(login, ConsumerConfig.GROUP_ID_CONFIG,
                env.name("not-carols"))) {
            consumer.subscribe(List.of(topic));
            fails("a group without an ACL", () -> Env.poll(consumer, 1), GroupAuthorizationException.class);
        }
    }

    /** The unprivileged user is refused a topic until an ACL allows it, and again once a DENY is added. */
    static void aclsEnforced(Env env) throws Exception {
        String topic = env.name("guarded");
        env.createTopic(topic, 1);
        // Not idempotent: only the topic's ACLs decide (InitProducerId would need a WRITE somewhere).
        try (KafkaProducer<String, String> producer = env.producer(env.userSecurity,
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false)) {
            fails("writing without an ACL", () -> Env.send(producer, topic, 0, 1, "x"),
                    TopicAuthorizationException.class);
        }
        AclBinding write = AdminCases.binding(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:client", "*",
                AclOperation.WRITE, AclPermissionType.ALLOW);
        get(env.admin().createAcls(List.of(write)).all());
        await("the client's write once allowed", WAIT, () -> trySend(env, env.userSecurity, topic, false), e -> e == null);
        AclBinding deny = AdminCases.binding(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:client", "*",
                AclOperation.WRITE, AclPermissionType.DENY);
        get(env.admin().createAcls(List.of(deny)).all());
        await("the client's write once denied", WAIT, () -> trySend(env, env.userSecurity, topic, false),
                e -> e instanceof TopicAuthorizationException);
    }

    /** null when one record reached {@code topic} as {@code login}, else the error's root cause. */
    private static Throwable trySend(Env env, Properties login, String topic, boolean idempotent) {
        try (KafkaProducer<String, String> producer = env.producer(login, ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
                idempotent)) {
            Env.send(producer, topic, 0, 1, "probe");
            return null;
        } catch (Exception e) {
            Throwable cause = e;
            while (cause.getCause() != null) {
                cause = cause.getCause();
            }
            return cause;
        }
    }
}
