// Turns a CloudFormation template (SAM-transformed, or synthesized by CDK) into plain data two
// templates can be compared by: intrinsic functions flattened into `${Name}` text, conditions
// evaluated for given parameter values, logical ids replaced by the construct names they stand
// for, and policy documents put in one order.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Template = { Resources: Record<string, Resource>; Conditions?: Record<string, Json>; Parameters?: Record<string, { Default?: Json }> };
export type Resource = { Type: string; Properties?: Record<string, Json>; Metadata?: Record<string, Json> };

const NO_VALUE = Symbol('AWS::NoValue');

export class Normalizer {
  /** Logical id → the name it is compared by. */
  readonly names: Record<string, string> = {};
  private readonly conditions: Record<string, boolean> = {};

  /**
   * `values`: parameter values substituted for `Ref`s (the rest stay `${Name}`); they also decide
   * the template's conditions.
   */
  constructor(
    readonly template: Template,
    private readonly values: Record<string, Json>,
  ) {
    for (const [id, r] of Object.entries(template.Resources)) {
      this.names[id] = constructName(id, r);
    }
    for (const name of Object.keys(template.Conditions ?? {})) {
      this.conditions[name] = this.condition(name);
    }
  }

  /** Resources of a type, by compared name. */
  ofType(type: string): Record<string, Record<string, Json>> {
    const out: Record<string, Record<string, Json>> = {};
    for (const [id, r] of Object.entries(this.template.Resources)) {
      if (r.Type === type && this.included(r)) {
        out[this.names[id]] = this.flatten(r.Properties ?? {}) as Record<string, Json>;
      }
    }
    return out;
  }

  private included(r: Resource & { Condition?: string }): boolean {
    return r.Condition === undefined || this.conditions[r.Condition];
  }

  private condition(name: string): boolean {
    return this.truth(this.template.Conditions![name]);
  }

  private truth(v: Json): boolean {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const [fn, arg] = Object.entries(v)[0];
      const args = arg as Json[];
      switch (fn) {
        case 'Fn::Equals':
          return JSON.stringify(this.value(args[0])) === JSON.stringify(this.value(args[1]));
        case 'Fn::Not':
          return !this.truth(args[0]);
        case 'Fn::And':
          return args.every((a) => this.truth(a));
        case 'Fn::Or':
          return args.some((a) => this.truth(a));
        case 'Condition':
          return this.condition(arg as string);
      }
    }
    throw new Error(`cannot evaluate condition ${JSON.stringify(v)}`);
  }

  /** The value of a condition operand (parameters substituted; lists stay lists). */
  private value(v: Json): Json {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      if ('Ref' in v) {
        return this.values[v.Ref as string] ?? this.defaultOf(v.Ref as string);
      }
      if ('Fn::Join' in v) {
        const [sep, parts] = v['Fn::Join'] as [string, Json];
        const items = this.value(parts);
        return (Array.isArray(items) ? items : [items]).map((p) => String(this.value(p))).join(sep);
      }
    }
    return v;
  }

  private defaultOf(name: string): Json {
    const p = this.template.Parameters?.[name];
    if (p === undefined) {
      throw new Error(`no value for ${name}`);
    }
    const d = p.Default ?? '';
    return (p as { Type?: string }).Type === 'CommaDelimitedList' ? String(d).split(',').filter(Boolean) : d;
  }

  /** A reference as text: a parameter's value when given, else `${Name}` / `${Name.Attr}`. */
  private ref(name: string, attr?: string): Json {
    if (attr === undefined && name in this.values) {
      return this.values[name];
    }
    const base = this.names[name] ?? name;
    return attr === undefined ? `\${${base}}` : `\${${base}.${attr}}`;
  }

  private sub(text: string, vars: Record<string, Json>): string {
    return text.replace(/\$\{([^}!]+)\}/g, (_, key: string) => {
      if (key in vars) {
        return String(this.flatten(vars[key]));
      }
      const [name, attr] = key.split('.');
      return String(this.ref(name, attr));
    });
  }

  flatten(v: Json): Json {
    const out = this.flattenOrDrop(v);
    return out === NO_VALUE ? null : (out as Json);
  }

  private flattenOrDrop(v: Json): Json | typeof NO_VALUE {
    if (Array.isArray(v)) {
      return v.map((x) => this.flattenOrDrop(x)).filter((x) => x !== NO_VALUE) as Json[];
    }
    if (v === null || typeof v !== 'object') {
      return v;
    }
    const keys = Object.keys(v);
    if (keys.length === 1 && (keys[0] === 'Ref' || keys[0].startsWith('Fn::'))) {
      return this.intrinsic(keys[0], v[keys[0]]);
    }
    const out: Record<string, Json> = {};
    for (const [k, x] of Object.entries(v)) {
      const f = this.flattenOrDrop(x);
      if (f !== NO_VALUE) {
        out[k] = f;
      }
    }
    return out;
  }

  private intrinsic(fn: string, arg: Json): Json | typeof NO_VALUE {
    switch (fn) {
      case 'Ref':
        return arg === 'AWS::NoValue' ? NO_VALUE : this.ref(arg as string);
      case 'Fn::GetAtt': {
        const [name, attr] = Array.isArray(arg) ? (arg as string[]) : String(arg).split('.');
        return this.ref(name, attr);
      }
      case 'Fn::Sub':
        return Array.isArray(arg)
          ? this.sub(arg[0] as string, arg[1] as Record<string, Json>)
          : this.sub(arg as string, {});
      case 'Fn::Join': {
        const [sep, parts] = arg as [string, Json];
        const flat = this.flatten(parts);
        return (Array.isArray(flat) ? flat : [flat]).map((p) => (typeof p === 'string' ? p : JSON.stringify(p))).join(sep);
      }
      case 'Fn::Select': {
        const [index, list] = arg as [number, Json];
        const flat = this.flatten(list);
        return Array.isArray(flat) ? flat[Number(index)] : `\${Select ${index} ${JSON.stringify(flat)}}`;
      }
      case 'Fn::If': {
        const [cond, yes, no] = arg as [string, Json, Json];
        return this.flattenOrDrop(this.conditions[cond] ? yes : no);
      }
      default:
        return { [fn]: this.flatten(arg) };
    }
  }
}

/**
 * The name a resource is compared by: a SAM logical id as it is; a CDK resource by its construct
 * path below the `Fleetwright` construct, without `Resource` and `Observability`
 * (`.../Fleetwright/Observability/TickDlqAlarm/Resource` → `TickDlqAlarm`).
 */
function constructName(id: string, r: Resource): string {
  const path = r.Metadata?.['aws:cdk:path'];
  if (typeof path !== 'string') {
    return id;
  }
  const parts = path.split('/');
  const at = parts.indexOf('Fleetwright');
  if (at < 0) {
    return id;
  }
  return parts
    .slice(at + 1)
    .filter((p) => p !== 'Resource' && p !== 'Observability')
    .join('');
}

/** A policy document in one order: lists sorted, single values as lists, statements by Sid. */
export function policy(doc: Json): Json {
  const parsed = typeof doc === 'string' ? (JSON.parse(doc) as Json) : doc;
  const d = parsed as { Statement: Json[] };
  return {
    Version: '2012-10-17',
    Statement: d.Statement.map(statement).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
  };
}

/** One statement, keys in order; `Principal: "*"` written as the `{AWS: "*"}` it means. */
function statement(s: Json): Json {
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(s as Record<string, Json>).sort(([a], [b]) => a.localeCompare(b))) {
    const value = k === 'Principal' && v === '*' ? { AWS: '*' } : v;
    out[k] = k === 'Sid' || k === 'Effect' ? value : sorted(value);
  }
  return out;
}

/** Lists sorted and single strings made lists, at every depth. */
export function sorted(v: Json): Json {
  if (typeof v === 'string') {
    return [v];
  }
  if (Array.isArray(v)) {
    return v.map((x) => (typeof x === 'string' ? x : JSON.stringify(sorted(x)))).sort();
  }
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, sorted(x)]));
  }
  return v;
}
