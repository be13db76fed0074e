package odradek.compat;

/**
 * One check of the program: a name (printed in its result line), whether the quick subset
 * runs it, whether it needs the SASL_SSL cluster, its time limit, and its body.
 */
record Case(String name, boolean quick, boolean securedOnly, int timeoutSeconds, Body body) {

    @FunctionalInterface
    interface Body {
        void run(Env env) throws Exception;
    }

    static Case quick(String name, Body body) {
        return new Case(name, true, false, 90, body);
    }

    static Case full(String name, Body body) {
        return new Case(name, false, false, 90, body);
    }

    static Case secured(String name, Body body) {
        return new Case(name, false, true, 90, body);
    }
}
