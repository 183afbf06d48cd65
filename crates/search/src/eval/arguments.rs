//! A spec's launch arguments against its kernels' parameters: number, kind
//! (buffer or scalar) and, for scalars, type. Each refusal names the spec
//! line, the argument, the spec's type and the kernel's, the kernel by its
//! demangled name (in either spec form), and says when the spec's
//! arguments have the kernel's types in another order.

use super::EvalError;
use gevo_ir::{display_name, source_parameter_types};
use gevo_model::sim::code::{ParamSlot, Program};
use gevo_model::spec::{self, ElemType, LaunchArg, LaunchSpec, Location, Spec};

/// What a parameter or an argument is, as far as passing it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Pointer,
    Int(u32),
    Float(u32),
}

impl Class {
    fn of_param(p: &ParamSlot) -> Class {
        match (p.is_pointer, p.float) {
            (true, _) => Class::Pointer,
            (false, true) => Class::Float(p.bits),
            (false, false) => Class::Int(p.bits),
        }
    }

    fn of_arg(ty: Option<ElemType>) -> Class {
        match ty {
            None => Class::Pointer,
            Some(t) if t.is_float() => Class::Float(t.size() as u32 * 8),
            Some(t) => Class::Int(t.size() as u32 * 8),
        }
    }

    /// The IR's words for a parameter of this class.
    fn ir_words(self) -> String {
        match self {
            Class::Pointer => "a pointer".into(),
            Class::Int(bits) => format!("a {bits}-bit integer"),
            Class::Float(32) => "a 32-bit float".into(),
            Class::Float(bits) => format!("a {bits}-bit float"),
        }
    }
}

/// One argument of a launch as the spec writes it.
struct Arg {
    name: String,
    /// `None` for a buffer.
    ty: Option<ElemType>,
    at: Location,
}

impl Arg {
    /// Argument `i` of `launch`, located at `field[i]` (`args[2]`,
    /// `launches[1].args[2]`).
    fn of(spec: &Spec, launch: &LaunchSpec, field: &str, i: usize, arg: &LaunchArg) -> Arg {
        let mut arg = Arg::written_at(spec, launch, arg);
        arg.at.field = format!("{field}[{i}]");
        arg
    }

    fn written_at(spec: &Spec, launch: &LaunchSpec, arg: &LaunchArg) -> Arg {
        match arg {
            LaunchArg::Named(j) => {
                let a = &spec.args[*j];
                Arg {
                    name: a.name.clone(),
                    ty: match &a.kind {
                        spec::ArgKind::Buffer { .. } => None,
                        spec::ArgKind::Scalar { ty, .. } => Some(*ty),
                    },
                    at: if spec.is_single_launch() {
                        a.at.clone()
                    } else {
                        // The entry's own line is elsewhere; the launch's is
                        // where it is passed.
                        launch.geometry.block_at.clone()
                    },
                }
            }
            LaunchArg::Scalar { name, ty, value } => Arg {
                name: name.clone().unwrap_or_else(|| "scalar".into()),
                ty: Some(*ty),
                at: value.at.clone(),
            },
        }
    }

    /// `buffer` or the scalar's type, as the spec spells it.
    fn written(&self) -> String {
        match self.ty {
            None => "buffer".into(),
            Some(t) => format!("{} scalar", t.name()),
        }
    }
}

/// Every launch's arguments must match its kernel's parameters in number,
/// kind (buffers for pointers) and type (a scalar of the parameter's width,
/// float for float, integer for integer).
pub(super) fn check(spec: &Spec, programs: &[Program]) -> Result<(), EvalError> {
    for launch in spec.launch_specs() {
        let program = &programs[launch.kernel];
        // Demangled, whichever way the spec names it.
        let kernel = display_name(&program.kernel);
        // The single-kernel form's messages name `args[i]`; a pipeline's
        // name the launch's (`launches[1].args[2]`).
        let field = if spec.is_single_launch() {
            "args".to_string()
        } else {
            format!("{}.args", launch.field)
        };
        let args: Vec<Arg> = launch
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| Arg::of(spec, launch, &field, i, a))
            .collect();
        let error = |at: &Location, message: String| EvalError::Spec(at.error(&spec.path, message));
        let (given, wanted) = (args.len(), program.params.len());
        if given != wanted {
            // The first argument too many, or the last one given.
            let at = match args.get(wanted.min(given.saturating_sub(1))) {
                Some(a) => a.at.clone(),
                None => Location {
                    field: field.clone(),
                    ..launch.geometry.block_at.clone()
                },
            };
            return Err(error(
                &at,
                format!(
                    "the spec {} {given} argument{} but kernel {kernel} takes {wanted}",
                    if spec.is_single_launch() {
                        "lists"
                    } else {
                        "passes"
                    },
                    if given == 1 { "" } else { "s" },
                ),
            ));
        }
        let params: Vec<Class> = program.params.iter().map(Class::of_param).collect();
        let classes: Vec<Class> = args.iter().map(|a| Class::of_arg(a.ty)).collect();
        let c_types = source_parameter_types(&program.kernel);
        let kernel_type = |i: usize| match c_types.as_ref().and_then(|t| t.get(i)) {
            Some(c) => format!("`{c}` ({})", params[i].ir_words()),
            None => params[i].ir_words(),
        };
        let Some(i) = (0..args.len()).find(|&i| classes[i] != params[i]) else {
            continue;
        };
        let arg = &args[i];
        let what = match (arg.ty, params[i]) {
            (None, _) => format!(
                "a buffer, but parameter {i} of kernel {kernel} is {}: pass a scalar (kind = \"scalar\")",
                kernel_type(i)
            ),
            (Some(_), Class::Pointer) => format!(
                "a scalar, but parameter {i} of kernel {kernel} is {}: pass a buffer (kind = \"buffer\")",
                kernel_type(i)
            ),
            (Some(ty), _) => format!(
                "type = \"{}\", but parameter {i} of kernel {kernel} is {}: the kernel would read \
                 the value's bits as {}",
                ty.name(),
                kernel_type(i),
                params[i].ir_words()
            ),
        };
        let mut message = format!("`{}`: {what}", arg.name);
        if let Some(order) = another_order(&args, &classes, &params) {
            message += &format!(
                "; the spec's arguments have the kernel's types in another order: {order}"
            );
        }
        return Err(error(&arg.at, message));
    }
    Ok(())
}

/// When the spec's arguments, reordered, fit the kernel's parameters: the
/// kernel's order of them (`in, out, n, scale`), for a message.
fn another_order(args: &[Arg], classes: &[Class], params: &[Class]) -> Option<String> {
    let mut sorted_args = classes.to_vec();
    let mut sorted_params = params.to_vec();
    sorted_args.sort();
    sorted_params.sort();
    if sorted_args != sorted_params {
        return None;
    }
    // Each parameter takes the first unused argument of its class, keeping
    // arguments already in place where they are.
    let mut used = vec![false; args.len()];
    for (i, p) in params.iter().enumerate() {
        if classes[i] == *p {
            used[i] = true;
        }
    }
    let mut order = Vec::new();
    for (i, p) in params.iter().enumerate() {
        if classes[i] == *p {
            order.push(format!("{} ({})", args[i].name, args[i].written()));
            continue;
        }
        let j = (0..args.len()).find(|&j| !used[j] && classes[j] == *p)?;
        used[j] = true;
        order.push(format!("{} ({})", args[j].name, args[j].written()));
    }
    Some(format!("the kernel takes {}", order.join(", ")))
}
